package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/client"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
)

func newHostfileCommand(api *Resolver) *cobra.Command {
	var (
		leaseID, format string
		byName          bool
	)
	cmd := &cobra.Command{
		Use:   "hostfile",
		Short: "Print a placed gang's members as a hostfile",
		Long: `Print the members of a placed gang (a lease created with nodes and gpus_per_node), in rank
order, for the launcher of a distributed job:

  better-compute hostfile --lease LEASE_ID > hosts             # Open MPI: HOST slots=G
  better-compute hostfile --lease LEASE_ID --format mpich      # MPICH, Hydra: HOST:G
  eval "$(better-compute hostfile --lease LEASE_ID --format torchrun)"
  torchrun --nnodes=$NNODES --nproc-per-node=$NPROC_PER_NODE --node-rank=R \
    --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py

Each member is named by the first address its daemon reported, or by its hostname with
--names (or when it reported none). Rank 0 is the first member; neighbours in rank share the
innermost domain of the pool's topology they can.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := api.Resolve()
			if err != nil {
				return err
			}
			c := client.New(t.URL, client.WithAPIKey(t.APIKey))
			res, err := c.Leases.Get(cmd.Context(), &leasesv1.GetRequest{Id: leaseID})
			if err != nil {
				return err
			}
			if err := client.WriteHostfile(cmd.OutOrStdout(), res.GetLease(), client.HostfileFormat(format), byName); err != nil {
				return fmt.Errorf("lease %s: %w", leaseID, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&leaseID, "lease", "", "the gang's lease id (required)")
	f.StringVar(&format, "format", string(client.HostfileOpenMPI), "openmpi, mpich or torchrun")
	f.BoolVar(&byName, "names", false, "name members by hostname rather than address")
	_ = cmd.MarkFlagRequired("lease")
	return cmd
}
