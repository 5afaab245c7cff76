// Package metrics is the process's Prometheus metrics: a small registry of counters, gauges and
// histograms with labels, written in the Prometheus text exposition format 0.0.4 at /metrics, and
// the bc_* instruments of Better Compute (API calls, gateway sessions and dispatch latency, the
// reconcile queues, leases, outbox lag and the connection pool), some of which are read from the
// database at scrape time behind a short cache.
//
// The registry is written here rather than taken from client_golang: the text format is small
// and stable, the few instrument kinds the control plane needs fit in a few hundred lines, and
// the binary keeps no dependency for them. Tests parse the output with Prometheus's own parser.
//
// Registration panics on a programmer's error (an invalid or duplicate name, a label name that
// is not allowed), like regexp.MustCompile: names are constants, so a mistake shows in any test.
package metrics

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// MaxLabels is the most labels a family may have. A fixed bound lets a series be looked up by
// an array key without allocating.
const MaxLabels = 4

// Type is a metric family's type, as written on its # TYPE line.
type Type string

// The metric types this registry writes.
const (
	TypeCounter   Type = "counter"
	TypeGauge     Type = "gauge"
	TypeHistogram Type = "histogram"
)

var (
	metricNamePattern = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNamePattern  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// family is one metric name with its HELP and TYPE lines and its series.
type family interface {
	head() *header
	// write appends the family's sample lines (no HELP or TYPE) to w.
	write(w *bufio.Writer)
}

// header is what every family has: its name, HELP text, type and label names.
type header struct {
	name, help string
	typ        Type
	labels     []string
}

func (d *header) head() *header { return d }

// Registry holds metric families and writes them in the text format.
type Registry struct {
	mu       sync.Mutex
	families map[string]family
	taken    map[string]bool // every series name, histograms' _bucket, _sum and _count included
	hooks    []func(context.Context)

	setsMu sync.Mutex
	sets   map[string]any // instrument sets, one of each kind per registry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]family{}, taken: map[string]bool{}, sets: map[string]any{}}
}

// set returns the registry's instrument set of a kind, building it on first use, so that two
// users of one registry (two servers in a test process, say) share instruments instead of
// registering the same names twice.
func set[T any](r *Registry, kind string, build func() T) T {
	r.setsMu.Lock()
	defer r.setsMu.Unlock()
	if s, ok := r.sets[kind]; ok {
		return s.(T)
	}
	s := build() // registers families under r.mu
	r.sets[kind] = s
	return s
}

// OnScrape registers f to run before every scrape, for values read on demand (from the
// database, say). f should bound its own cost; the registry runs hooks one after another with
// the scrape's context.
func (r *Registry) OnScrape(f func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, f)
}

// register adds a family, panicking on an invalid or taken name.
func (r *Registry) register(f family) {
	d := f.head()
	if !metricNamePattern.MatchString(d.name) || strings.HasPrefix(d.name, "__") {
		panic(fmt.Sprintf("metrics: invalid metric name %q", d.name))
	}
	if d.typ == TypeCounter && !strings.HasSuffix(d.name, "_total") {
		panic(fmt.Sprintf("metrics: counter %q must end in _total", d.name))
	}
	if len(d.labels) > MaxLabels {
		panic(fmt.Sprintf("metrics: %s has %d labels, at most %d allowed", d.name, len(d.labels), MaxLabels))
	}
	for i, l := range d.labels {
		switch {
		case !labelNamePattern.MatchString(l) || strings.HasPrefix(l, "__"):
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", d.name, l))
		case d.typ == TypeHistogram && l == "le":
			panic(fmt.Sprintf("metrics: %s: a histogram cannot have a label named le", d.name))
		case slices.Contains(d.labels[:i], l):
			panic(fmt.Sprintf("metrics: %s: label %q given twice", d.name, l))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Histograms add _bucket, _sum and _count series; keep every name distinct.
	names := seriesNames(d)
	for _, n := range names {
		if r.taken[n] {
			panic(fmt.Sprintf("metrics: %s is already registered", n))
		}
	}
	for _, n := range names {
		r.taken[n] = true
	}
	r.families[d.name] = f
}

func seriesNames(d *header) []string {
	if d.typ == TypeHistogram {
		return []string{d.name, d.name + "_bucket", d.name + "_sum", d.name + "_count"}
	}
	return []string{d.name}
}

// WriteText runs the scrape hooks and writes every family in the text format 0.0.4: families by
// name, each with its HELP and TYPE lines, series sorted by label values.
func (r *Registry) WriteText(ctx context.Context, w io.Writer) error {
	r.mu.Lock()
	hooks := slices.Clone(r.hooks)
	r.mu.Unlock()
	for _, h := range hooks {
		h(ctx)
	}
	r.mu.Lock()
	fams := make([]family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.head().name, b.head().name) })

	bw := bufio.NewWriter(w)
	for _, f := range fams {
		d := f.head()
		bw.WriteString("# HELP ")
		bw.WriteString(d.name)
		bw.WriteByte(' ')
		writeEscaped(bw, d.help, false)
		bw.WriteString("\n# TYPE ")
		bw.WriteString(d.name)
		bw.WriteByte(' ')
		bw.WriteString(string(d.typ))
		bw.WriteByte('\n')
		f.write(bw)
	}
	return bw.Flush()
}

// scrapeTimeout bounds the scrape hooks when the scraper sends no timeout of its own.
const scrapeTimeout = 10 * time.Second

// Handler serves the registry at GET (and HEAD), gzip-compressed when the scraper accepts it.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), scrapeTimeout)
		defer cancel()
		w.Header().Set("Content-Type", ContentType)
		if req.Method == http.MethodHead {
			return
		}
		var out io.Writer = w
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Add("Vary", "Accept-Encoding")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		_ = r.WriteText(ctx, out) // a scraper that went away is no error of ours
	})
}

func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}
