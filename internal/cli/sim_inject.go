package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/devmode"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/sim"
)

// newSimInjectCommand is `sim inject`: a GPU fault for a running simulator's machine, through
// its control socket.
func newSimInjectCommand() *cobra.Command {
	var (
		control, node, check, detail string
		gpu                          int
		xid, code, count             int64
		clear                        bool
	)
	cmd := &cobra.Command{
		Use:   "inject",
		Short: "Make a simulated machine report a GPU fault",
		Long: `Make a machine of a running simulator (better-compute sim --control, or dev --sim) report a
GPU health signal, as bcd's checks would see it on a real node, through the simulator's control
socket (--control; by default dev's). The signal names the GPU by the UUID and PCI bus id of the
machine's inventory; the same GPU, check and code again is counted. Signals last until --clear
(as a GPU reset) or a reboot command; a crash of the daemon keeps them. It prints the machine's
signals after the call.

  better-compute sim inject --node sim-0003 --gpu 3 --xid 79
  better-compute sim inject --node sim-0003 --gpu 0 --check row_remap_pending
  better-compute sim inject --node sim-0003 --gpu 5 --check thermal_slowdown --code 92
  better-compute sim inject --node sim-0003 --check driver_not_answering
  better-compute sim inject --node sim-0003 --clear`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if control == "" {
				var err error
				if control, err = devmode.SimControlPath(""); err != nil {
					return fmt.Errorf("--control: %w", err)
				}
			}
			c := sim.NewControlClient(control)
			if clear {
				res, err := c.Clear(cmd.Context(), node)
				if err != nil {
					return err
				}
				printGPUHealth(cmd.OutOrStdout(), res)
				return nil
			}
			if cmd.Flags().Changed("xid") {
				check, code = gpuhealth.CheckXid, xid
			}
			req := sim.InjectRequest{Hostname: node, Check: check, Code: code, Count: count, Detail: detail}
			switch {
			case cmd.Flags().Changed("gpu"):
				req.GPU = &gpu
			case check != gpuhealth.CheckDriverNotAnswering:
				return errors.New("--gpu is required: the GPU's index on the node (0 to 7 on an 8-GPU machine)")
			}
			res, err := c.Inject(cmd.Context(), req)
			if err != nil {
				return err
			}
			printGPUHealth(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&control, "control", "", "the simulator's control socket (default: dev's, beside its private PostgreSQL directory)")
	f.StringVar(&node, "node", "", "the machine's hostname, sim-0001 and up (required)")
	f.IntVar(&gpu, "gpu", 0, "the GPU's index on the machine, as nvidia-smi numbers them")
	f.Int64Var(&xid, "xid", 0, "an Xid event (79: fallen off the bus, 48: double-bit ECC, 13/31/43: application errors); the same as --check xid --code N")
	f.StringVar(&check, "check", "", "the health check that saw it: xid, ecc_dbe, row_remap_pending, thermal_slowdown, gpu_missing, driver_not_answering, …")
	f.Int64Var(&code, "code", 0, "the check's code (the Xid, the recovery action)")
	f.Int64Var(&count, "count", 1, "how many occurrences")
	f.StringVar(&detail, "detail", "", "the source's text (default: what the kernel log or nvidia-smi would say)")
	f.BoolVar(&clear, "clear", false, "remove every signal of the machine, as a GPU reset does")
	_ = cmd.MarkFlagRequired("node")
	cmd.MarkFlagsMutuallyExclusive("xid", "check", "clear")
	cmd.MarkFlagsMutuallyExclusive("xid", "code")
	cmd.MarkFlagsOneRequired("xid", "check", "clear")
	return cmd
}

// printGPUHealth prints a machine's signals, one a line.
func printGPUHealth(out io.Writer, h sim.GPUHealthResponse) {
	fmt.Fprintf(out, "%s: %d GPU signals\n", h.Hostname, len(h.Signals))
	if h.ProbeError != "" {
		fmt.Fprintf(out, "  probe error: %s\n", h.ProbeError)
	}
	for _, s := range h.Signals {
		gpu := s.GPUUUID
		if gpu == "" {
			gpu = "node"
		}
		fmt.Fprintf(out, "  %s %s %s code %d count %d: %s\n", gpu, s.PCIBusID, s.Check, s.Code, s.Count, s.Detail)
	}
}
