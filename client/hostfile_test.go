package client_test

import (
	"errors"
	"strings"
	"testing"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"

	"github.com/better-compute/better-compute/client"
)

func TestWriteHostfile(t *testing.T) {
	t.Parallel()
	gang := &leasesv1.Lease{Nodes: 2, GpusPerNode: 4, Members: []*leasesv1.Member{
		{Rank: 0, NodeId: "n0", Hostname: "gpu-0001", Addresses: []string{"10.0.0.1"}, GpuIndexes: []int32{0, 1, 2, 3}},
		{Rank: 1, NodeId: "n1", Hostname: "gpu-0002", GpuIndexes: []int32{4, 5, 6, 7}},
	}}
	for _, tc := range []struct {
		format client.HostfileFormat
		byName bool
		want   string
	}{
		{client.HostfileOpenMPI, false, "10.0.0.1 slots=4\ngpu-0002 slots=4\n"},
		{client.HostfileOpenMPI, true, "gpu-0001 slots=4\ngpu-0002 slots=4\n"},
		{client.HostfileMPICH, false, "10.0.0.1:4\ngpu-0002:4\n"},
		{client.HostfileTorchrun, false, "MASTER_ADDR=10.0.0.1\nMASTER_PORT=29500\nNNODES=2\nNPROC_PER_NODE=4\nWORLD_SIZE=8\n" +
			"# NODE_RANK=0 on 10.0.0.1 (n0)\n# NODE_RANK=1 on gpu-0002 (n1)\n"},
	} {
		var b strings.Builder
		if err := client.WriteHostfile(&b, gang, tc.format, tc.byName); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s (by name %v):\n%s\nwant\n%s", tc.format, tc.byName, b.String(), tc.want)
		}
	}
	if err := client.WriteHostfile(&strings.Builder{}, &leasesv1.Lease{Gpus: 2}, client.HostfileOpenMPI, false); !errors.Is(err, client.ErrNotGang) {
		t.Errorf("a lease of one node: %v, want ErrNotGang", err)
	}
	if err := client.WriteHostfile(&strings.Builder{}, gang, "slurm", false); err == nil {
		t.Error("an unknown format was written")
	}
}
