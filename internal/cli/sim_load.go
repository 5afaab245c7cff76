package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/devmode"
	"github.com/better-compute/better-compute/internal/sim"
)

// newSimLoadCommand is `sim load`: the load profile of a running simulator's GPU, through its
// control socket.
func newSimLoadCommand() *cobra.Command {
	var (
		control, node, profile string
		gpu                    int
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Set how busy a simulated machine's GPU is",
		Long: `Set the load profile of a GPU of a machine of a running simulator (better-compute sim --control,
or dev --sim), through the simulator's control socket (--control; by default dev's): idle (0–2%),
busy (85–100%) or bursty (busy in even minutes, idle in odd ones). The machine's daemon samples
its GPUs every few seconds and sends a summary per GPU per minute, as bcd does on a real node
(docs/gpus.md, "Utilisation sampling"). Without --gpu, every GPU of the machine. It prints the
machine's profiles after the call. A simulator gives each GPU a profile from its seed at start.

  better-compute sim load --node sim-0003 --gpu 2 --profile idle
  better-compute sim load --node sim-0003 --profile bursty`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if control == "" {
				var err error
				if control, err = devmode.SimControlPath(""); err != nil {
					return fmt.Errorf("--control: %w", err)
				}
			}
			req := sim.LoadRequest{Hostname: node, Profile: profile}
			if cmd.Flags().Changed("gpu") {
				req.GPU = &gpu
			}
			res, err := sim.NewControlClient(control).Load(cmd.Context(), req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: %d GPUs\n", res.Hostname, len(res.GPUs))
			for _, g := range res.GPUs {
				fmt.Fprintf(out, "  %d %s %s\n", g.Index, g.UUID, g.Profile)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&control, "control", "", "the simulator's control socket (default: dev's, beside its private PostgreSQL directory)")
	f.StringVar(&node, "node", "", "the machine's hostname, sim-0001 and up (required)")
	f.IntVar(&gpu, "gpu", 0, "the GPU's index on the machine, as nvidia-smi numbers them (default: every GPU)")
	f.StringVar(&profile, "profile", "", "idle, busy or bursty (required)")
	_ = cmd.MarkFlagRequired("node")
	_ = cmd.MarkFlagRequired("profile")
	return cmd
}
