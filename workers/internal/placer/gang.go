package placer

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/placement"
)

// gangOf is a pending gang's shape for the planner, or why it can never be placed: its level is
// not one of the pool's topology levels (they changed after it was created).
func gangOf(r db.PendingPoolLeasesRow, levels []string) (*placement.Gang, string) {
	g := &placement.Gang{Nodes: r.Nodes, GPUsPerNode: r.GpusPerNode, Level: -1, LevelRequired: r.GangLevelRequired}
	if r.GangLevel != "" {
		g.Level = slices.Index(levels, r.GangLevel)
		if g.Level < 0 {
			return nil, fmt.Sprintf("the pool no longer has the topology level %q the gang asks for", r.GangLevel)
		}
	}
	return g, ""
}

// domainOf is a node's value of each topology level, from its labels (a JSON object); "" where
// it lacks the label or its labels cannot be read.
func domainOf(levels []string, labels []byte) []string {
	var m map[string]string
	_ = json.Unmarshal(labels, &m) // unreadable labels: the node is in no domain
	out := make([]string, len(levels))
	for i, k := range levels {
		out[i] = m[k]
	}
	return out
}
