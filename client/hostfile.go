package client

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
)

// HostfileFormat is how WriteHostfile writes a gang's members.
type HostfileFormat string

// Formats of WriteHostfile.
const (
	// HostfileOpenMPI is Open MPI's hostfile: "HOST slots=G", a line per member in rank order.
	HostfileOpenMPI HostfileFormat = "openmpi"
	// HostfileMPICH is MPICH's and Hydra's: "HOST:G".
	HostfileMPICH HostfileFormat = "mpich"
	// HostfileTorchrun is the environment torchrun's static rendezvous needs, as shell
	// assignments: MASTER_ADDR (rank 0), MASTER_PORT, NNODES, NPROC_PER_NODE and WORLD_SIZE, then
	// one NODE_RANK line per member as a comment naming its host.
	HostfileTorchrun HostfileFormat = "torchrun"
)

// ErrNotGang is returned by WriteHostfile for a lease that is not a placed gang.
var ErrNotGang = errors.New("the lease is not a placed gang (leases/create with nodes, then placed)")

// DefaultMasterPort is the port HostfileTorchrun names for rank 0's rendezvous.
const DefaultMasterPort = 29500

// WriteHostfile writes a placed gang's members, in rank order, in format: what an MPI launcher or
// torchrun needs to start a job across them. Each member is named by its first address, or its
// hostname when byName is true or its daemon reported no address.
func WriteHostfile(w io.Writer, l *leasesv1.Lease, format HostfileFormat, byName bool) error {
	ms := l.GetMembers()
	if l.GetNodes() == 0 || len(ms) == 0 {
		return ErrNotGang
	}
	host := func(m *leasesv1.Member) string {
		if a := m.GetAddresses(); !byName && len(a) > 0 {
			return a[0]
		}
		return m.GetHostname()
	}
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	switch format {
	case HostfileOpenMPI:
		for _, m := range ms {
			p("%s slots=%d\n", host(m), len(m.GetGpuIndexes()))
		}
	case HostfileMPICH:
		for _, m := range ms {
			p("%s:%d\n", host(m), len(m.GetGpuIndexes()))
		}
	case HostfileTorchrun:
		p("MASTER_ADDR=%s\nMASTER_PORT=%d\nNNODES=%d\nNPROC_PER_NODE=%d\nWORLD_SIZE=%d\n",
			host(ms[0]), DefaultMasterPort, len(ms), l.GetGpusPerNode(), len(ms)*int(l.GetGpusPerNode()))
		for _, m := range ms {
			p("# NODE_RANK=%s on %s (%s)\n", strconv.Itoa(int(m.GetRank())), host(m), m.GetNodeId())
		}
	default:
		return fmt.Errorf("unknown hostfile format %q (openmpi, mpich or torchrun)", format)
	}
	return err
}
