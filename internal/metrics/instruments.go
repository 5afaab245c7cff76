package metrics

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// labelKey holds a series' label values; unused slots stay empty.
type labelKey [MaxLabels]string

func compareKeys(a, b labelKey) int {
	for i := range a {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// vec is a family's series by label values. Lookups of existing series take a read lock and do
// not allocate.
type vec[S any] struct {
	header
	mu        sync.RWMutex
	series    map[labelKey]*S
	newSeries func() *S
}

func newVec[S any](name, help string, typ Type, labels []string, newSeries func() *S) *vec[S] {
	return &vec[S]{
		header:    header{name: name, help: help, typ: typ, labels: slices.Clone(labels)},
		series:    map[labelKey]*S{},
		newSeries: newSeries,
	}
}

// get returns the series of the label values, creating it on first use. It panics when the
// number of values differs from the family's labels.
func (v *vec[S]) get(values []string) *S {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values (%s), got %d", v.name, len(v.labels), strings.Join(v.labels, ", "), len(values)))
	}
	var k labelKey
	copy(k[:], values)
	v.mu.RLock()
	s := v.series[k]
	v.mu.RUnlock()
	if s != nil {
		return s
	}
	for i := range values {
		k[i] = strings.ToValidUTF8(k[i], "\uFFFD") // the format is UTF-8
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[k]; s == nil {
		s = v.newSeries()
		v.series[k] = s
	}
	return s
}

// delete removes the series of the label values, if any.
func (v *vec[S]) delete(values []string) {
	var k labelKey
	copy(k[:], values)
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.series, k)
}

// reset removes every series.
func (v *vec[S]) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.series)
}

// sorted returns the series in label order.
func (v *vec[S]) sorted() ([]labelKey, []*S) {
	v.mu.RLock()
	keys := make([]labelKey, 0, len(v.series))
	for k := range v.series {
		keys = append(keys, k)
	}
	v.mu.RUnlock()
	slices.SortFunc(keys, compareKeys)
	out := make([]*S, len(keys))
	v.mu.RLock()
	for i, k := range keys {
		out[i] = v.series[k]
	}
	v.mu.RUnlock()
	return keys, out
}

// Counter is a value that only goes up.
type Counter struct {
	n    atomic.Uint64 // whole increments, the common case
	bits atomic.Uint64 // the float64 sum of fractional additions
}

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds v, which must not be negative.
func (c *Counter) Add(v float64) {
	switch {
	case v < 0 || math.IsNaN(v):
		panic(fmt.Sprintf("metrics: a counter cannot add %v", v))
	case v == math.Trunc(v) && v < 1<<53:
		c.n.Add(uint64(v))
	default:
		addFloat(&c.bits, v)
	}
}

// Value is the counter's current value.
func (c *Counter) Value() float64 {
	return float64(c.n.Load()) + math.Float64frombits(c.bits.Load())
}

// CounterVec is a counter family.
type CounterVec struct{ v *vec[Counter] }

// Counter registers a counter family; its name must end in _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	v := newVec(name, help, TypeCounter, labels, func() *Counter { return new(Counter) })
	r.register(v)
	return &CounterVec{v}
}

// With returns the counter of the label values, in the order of the family's labels.
func (c *CounterVec) With(values ...string) *Counter { return c.v.get(values) }

func (v *vec[S]) write(w *bufio.Writer) {
	keys, series := v.sorted()
	for i, s := range series {
		switch s := any(s).(type) {
		case *Counter:
			writeSample(w, v.name, "", v.labels, keys[i], "", "", s.Value())
		case *Gauge:
			writeSample(w, v.name, "", v.labels, keys[i], "", "", s.Value())
		case *Histogram:
			s.write(w, v.name, v.labels, keys[i])
		}
	}
}

// Gauge is a value that goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds v (which may be negative).
func (g *Gauge) Add(v float64) { addFloat(&g.bits, v) }

// Inc adds one.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.Add(-1) }

// Value is the gauge's current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// GaugeVec is a gauge family.
type GaugeVec struct{ v *vec[Gauge] }

// Gauge registers a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	v := newVec(name, help, TypeGauge, labels, func() *Gauge { return new(Gauge) })
	r.register(v)
	return &GaugeVec{v}
}

// With returns the gauge of the label values, in the order of the family's labels.
func (g *GaugeVec) With(values ...string) *Gauge { return g.v.get(values) }

// Delete removes the series of the label values.
func (g *GaugeVec) Delete(values ...string) { g.v.delete(values) }

// Reset removes every series.
func (g *GaugeVec) Reset() { g.v.reset() }

// Histogram counts observations in buckets by upper bound.
type Histogram struct {
	upper  []float64       // the buckets' upper bounds, ascending, without +Inf
	counts []atomic.Uint64 // per bucket (not cumulative); the last is the +Inf bucket
	sum    atomic.Uint64   // float64 bits
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.upper, v)].Add(1)
	addFloat(&h.sum, v)
}

// ObserveDuration records d in seconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// Count is the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Sum is the sum of the observations.
func (h *Histogram) Sum() float64 { return math.Float64frombits(h.sum.Load()) }

func (h *Histogram) write(w *bufio.Writer, name string, labels []string, k labelKey) {
	var cum uint64
	for i, le := range h.upper {
		cum += h.counts[i].Load()
		writeSample(w, name, "_bucket", labels, k, "le", formatFloat(le), float64(cum))
	}
	cum += h.counts[len(h.upper)].Load()
	writeSample(w, name, "_bucket", labels, k, "le", "+Inf", float64(cum))
	writeSample(w, name, "_sum", labels, k, "", "", h.Sum())
	// _count equals the +Inf bucket even while observations race the scrape.
	writeSample(w, name, "_count", labels, k, "", "", float64(cum))
}

// HistogramVec is a histogram family.
type HistogramVec struct{ v *vec[Histogram] }

// Histogram registers a histogram family with the buckets' upper bounds, ascending; the +Inf
// bucket is implicit.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	for i, b := range upper {
		if math.IsNaN(b) || i > 0 && b <= upper[i-1] {
			panic(fmt.Sprintf("metrics: %s: buckets must be ascending numbers, got %v", name, buckets))
		}
	}
	v := newVec(name, help, TypeHistogram, labels, func() *Histogram {
		return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
	})
	r.register(v)
	return &HistogramVec{v}
}

// With returns the histogram of the label values, in the order of the family's labels.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.get(values) }

// DurationBuckets are latency buckets in seconds, from a millisecond to ten seconds.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Emit reports one sample of a collected family: its value and its label values, in the order
// of the family's labels.
type Emit func(value float64, labelValues ...string)

// funcFamily is a counter or gauge family whose samples are read when scraped.
type funcFamily struct {
	header
	collect func(Emit)
}

type sample struct {
	k labelKey
	v float64
}

func (f *funcFamily) write(w *bufio.Writer) {
	var samples []sample
	f.collect(func(v float64, values ...string) {
		if len(values) != len(f.labels) {
			panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
		}
		var k labelKey
		for i, s := range values {
			k[i] = strings.ToValidUTF8(s, "\uFFFD")
		}
		samples = append(samples, sample{k, v})
	})
	slices.SortStableFunc(samples, func(a, b sample) int { return compareKeys(a.k, b.k) })
	for i, s := range samples {
		if i+1 < len(samples) && samples[i+1].k == s.k {
			continue // a series emitted twice: the last value wins, so the output stays valid
		}
		writeSample(w, f.name, "", f.labels, s.k, "", "", s.v)
	}
}

// Func registers a counter or gauge family whose samples collect reports when scraped.
func (r *Registry) Func(name, help string, typ Type, labels []string, collect func(Emit)) {
	if typ != TypeCounter && typ != TypeGauge {
		panic(fmt.Sprintf("metrics: %s: a collected family is a counter or a gauge, not %s", name, typ))
	}
	r.register(&funcFamily{header: header{name: name, help: help, typ: typ, labels: slices.Clone(labels)}, collect: collect})
}

// GaugeFunc registers a gauge without labels whose value f returns when scraped.
func (r *Registry) GaugeFunc(name, help string, f func() float64) {
	r.Func(name, help, TypeGauge, nil, func(emit Emit) { emit(f()) })
}

func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
