package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/fleet"
)

// maxFilterText bounds the text filters (GPU model, pool, hostname prefix): longer values match
// nothing a daemon or join token would report, and are refused rather than sent to the database.
const maxFilterText = 256

// filterRequest is what ListRequest and SummaryRequest have in common: the filters.
type filterRequest interface {
	GetLabelSelector() map[string]string
	GetStates() []string
	GetGpuModel() string
	GetPool() string
	GetHostnamePrefix() string
}

// nodeFilter is a validated filter, in the form the nodes_views queries take.
type nodeFilter struct {
	selector       []byte
	states         []string
	online         *bool
	gpuModel       string
	pool           string
	hostnamePrefix string
}

// parseFilter validates every filter of req, naming each bad field (all of them at once). online
// is req's online field (the generated code has no interface method telling unset from false).
func parseFilter(req filterRequest, online *bool) (nodeFilter, error) {
	f := nodeFilter{
		states: []string{}, online: online,
		gpuModel: req.GetGpuModel(), pool: req.GetPool(), hostnamePrefix: req.GetHostnamePrefix(),
	}
	errs := []error{fleet.ValidateLabels("label_selector", req.GetLabelSelector())}
	if len(req.GetLabelSelector()) > 0 {
		f.selector = fleet.EncodeLabels(req.GetLabelSelector())
	}
	for _, s := range req.GetStates() {
		if !db.NodeState(s).Valid() {
			errs = append(errs, apierr.InvalidArgument("states", "unknown state %q; want one of %s", s, stateNames()))
			break
		}
		f.states = append(f.states, s)
	}
	errs = append(errs,
		validText("gpu_model", f.gpuModel), validText("pool", f.pool), validText("hostname_prefix", f.hostnamePrefix))
	if err := apierr.Join(errs...); err != nil {
		return nodeFilter{}, err
	}
	return f, nil
}

// validText refuses what PostgreSQL text cannot hold (NUL) and values beyond maxFilterText.
func validText(field, s string) error {
	if len(s) > maxFilterText {
		return apierr.InvalidArgument(field, "at most %d characters, got %d", maxFilterText, len(s))
	}
	if strings.ContainsRune(s, 0) {
		return apierr.InvalidArgument(field, "must not contain NUL characters")
	}
	return nil
}

func stateNames() string {
	var names []string
	for _, s := range db.AllNodeStateValues() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// Summary counts the tenant's nodes matching the filters, exactly, in one statement whose groups
// (state, online, GPU models, GPU count) it adds up here.
func (s *Service) Summary(ctx context.Context, req *nodesv1.SummaryRequest) (*nodesv1.SummaryResponse, error) {
	f, err := parseFilter(req, req.Online)
	if err != nil {
		return nil, err
	}
	groups, err := db.New(s.pool).SummarizeNodes(ctx, db.SummarizeNodesParams{
		TenantID: auth.Caller(ctx).TenantID, Selector: f.selector, States: f.states, Online: f.online,
		GpuModel: f.gpuModel, Pool: f.pool, HostnamePrefix: f.hostnamePrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("summarize nodes: %w", err)
	}
	res := &nodesv1.SummaryResponse{States: map[string]int64{}}
	byModel := map[string]*nodesv1.GpuModelCount{}
	for _, g := range groups {
		res.Total += g.Nodes
		res.States[string(g.State)] += g.Nodes
		if g.Online {
			res.Online += g.Nodes
		} else {
			res.Offline += g.Nodes
		}
		res.Gpus += g.Gpus * g.Nodes
		var models []string
		if err := json.Unmarshal(g.GpuModels, &models); err != nil {
			return nil, fmt.Errorf("summarize nodes: GPU models %s: %w", g.GpuModels, err)
		}
		// GPUs reported without a model count under "".
		for range g.Gpus - int64(len(models)) {
			models = append(models, "")
		}
		perNode := map[string]int64{}
		for _, m := range models {
			perNode[m]++
		}
		for m, n := range perNode {
			c := byModel[m]
			if c == nil {
				c = &nodesv1.GpuModelCount{Model: m}
				byModel[m] = c
			}
			c.Gpus += n * g.Nodes
			c.Nodes += g.Nodes
		}
	}
	for _, m := range slices.Sorted(maps.Keys(byModel)) {
		res.GpuModels = append(res.GpuModels, byModel[m])
	}
	return res, nil
}
