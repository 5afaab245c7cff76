package host

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/scrub"
)

// KmsgPath is the kernel log, read from its start: a new reader gets the ring buffer since boot
// (what it still holds), then every record as it is written.
const KmsgPath = "/dev/kmsg"

// The bounds of the Xid log (docs/gpus.md, "Signals").
const (
	// kmsgRecordMax is the read buffer: one read of /dev/kmsg returns one record, which the
	// kernel keeps under about 1 KiB of text (a record larger than the buffer is skipped).
	kmsgRecordMax = 8 << 10
	// MaxXidsPerGPU is the most distinct Xids counted per GPU; an Xid past it is not counted.
	MaxXidsPerGPU = 64
	// MaxXidGPUs is the most distinct PCI devices Xids are counted for.
	MaxXidGPUs = 64
)

// XidEvent is one Xid line of the kernel log.
type XidEvent struct {
	// PCI is the device as the driver prints it, "0000:18:00" (domain, bus, device).
	PCI string
	Xid int64
	// Message is the log message, from "NVRM: Xid".
	Message string
}

// ParseXid reads an Xid event from one kernel log message, in the forms the NVIDIA driver
// prints: "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
// without pid and name ("NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception ..."), and
// with a MIG instance after the PCI id ("(PCI:0000:18:00 GPU-I:05)"). false for any other line.
func ParseXid(msg string) (XidEvent, bool) {
	const mark = "NVRM: Xid ("
	i := strings.Index(msg, mark)
	if i < 0 {
		return XidEvent{}, false
	}
	msg = strings.TrimRight(msg[i:], "\r\n")
	rest := msg[len(mark):]
	inside, after, ok := strings.Cut(rest, "): ")
	if !ok {
		return XidEvent{}, false
	}
	id, _, _ := strings.Cut(strings.TrimSpace(inside), " ")
	pci, ok := strings.CutPrefix(id, "PCI:")
	if !ok {
		return XidEvent{}, false
	}
	if _, ok := parsePCIAddr(pci); !ok {
		return XidEvent{}, false
	}
	num, _, _ := strings.Cut(after, ",")
	xid, err := strconv.ParseInt(strings.TrimSpace(num), 10, 32)
	if err != nil || xid <= 0 {
		return XidEvent{}, false
	}
	return XidEvent{PCI: pci, Xid: xid, Message: msg}, true
}

// pciAddr is a PCI device (function left out), to compare the kernel log's "0000:18:00" with
// nvidia-smi's "00000000:18:00.0" by number.
type pciAddr struct {
	domain   uint32
	bus, dev uint8
}

// parsePCIAddr reads "[domain:]bus:device[.function]" in hex.
func parsePCIAddr(s string) (pciAddr, bool) {
	s, _, _ = strings.Cut(strings.TrimSpace(s), ".")
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return pciAddr{}, false
	}
	d, err1 := strconv.ParseUint(parts[0], 16, 32)
	b, err2 := strconv.ParseUint(parts[1], 16, 8)
	v, err3 := strconv.ParseUint(parts[2], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return pciAddr{}, false
	}
	return pciAddr{domain: uint32(d), bus: uint8(b), dev: uint8(v)}, true
}

// XidCount is what the log has seen of one Xid on one device.
type XidCount struct {
	// PCI is the device as the first of its events printed it.
	PCI                 string
	Xid                 int64
	Count               int64
	FirstSeen, LastSeen time.Time
	// Detail is the last event's message, at most gpuhealth.MaxDetailBytes.
	Detail string
}

// XidLog counts the Xid events of the kernel log per device and Xid, within MaxXidsPerGPU and
// MaxXidGPUs. Its zero value is ready; it is safe for concurrent use.
type XidLog struct {
	// Boot is when the kernel's clock started: a record is dated Boot plus its timestamp, so
	// that Xids replayed from the ring buffer keep their times. Zero dates records when read.
	Boot time.Time
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger

	mu      sync.Mutex
	counts  map[xidKey]*XidCount
	devices map[pciAddr]int // distinct Xids per device
	dropped bool            // an event was past the bounds (logged once)
	changed chan struct{}   // one pending notice of a change
}

type xidKey struct {
	dev pciAddr
	xid int64
}

// Changed receives after the log counts an event (notices coalesce: one may stand for many).
func (l *XidLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changedLocked()
}

func (l *XidLog) changedLocked() chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{}, 1)
	}
	return l.changed
}

// Record counts ev, seen at; false when it is past the bounds and not counted.
func (l *XidLog) Record(ev XidEvent, at time.Time) bool {
	dev, ok := parsePCIAddr(ev.PCI)
	if !ok {
		return false
	}
	detail := scrub.Truncate(scrub.String(ev.Message), gpuhealth.MaxDetailBytes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts, l.devices = map[xidKey]*XidCount{}, map[pciAddr]int{}
	}
	k := xidKey{dev, ev.Xid}
	c := l.counts[k]
	if c == nil {
		n, known := l.devices[dev]
		if (!known && len(l.devices) >= MaxXidGPUs) || n >= MaxXidsPerGPU {
			if !l.dropped {
				l.dropped = true
				l.logger().Warn("kernel log: too many distinct Xids; further ones are not counted",
					"pci", ev.PCI, "xid", ev.Xid, "max_per_gpu", MaxXidsPerGPU, "max_gpus", MaxXidGPUs)
			}
			return false
		}
		l.devices[dev] = n + 1
		c = &XidCount{PCI: ev.PCI, Xid: ev.Xid, FirstSeen: at}
		l.counts[k] = c
	}
	c.Count++
	c.Detail = detail
	if at.After(c.LastSeen) {
		c.LastSeen = at
	}
	select {
	case l.changedLocked() <- struct{}{}:
	default:
	}
	return true
}

// Counts returns the counts, sorted by device and Xid.
func (l *XidLog) Counts() []XidCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]xidKey, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b xidKey) int {
		return cmp.Or(cmp.Compare(a.dev.domain, b.dev.domain), cmp.Compare(a.dev.bus, b.dev.bus),
			cmp.Compare(a.dev.dev, b.dev.dev), cmp.Compare(a.xid, b.xid))
	})
	out := make([]XidCount, len(keys))
	for i, k := range keys {
		out[i] = *l.counts[k]
	}
	return out
}

// Read counts the Xid events of the kernel log records r gives, one record per read as
// /dev/kmsg gives them ("prio,seq,usec,flags;message", then continuation lines that start with
// a space), until r ends or is closed. Records overwritten before they were read (EPIPE) and a
// record over the buffer (EINVAL; the kernel skips it) are passed over.
func (l *XidLog) Read(r io.Reader) error {
	buf := make([]byte, kmsgRecordMax)
	for {
		n, err := r.Read(buf)
		for line := range bytes.SplitSeq(buf[:n], []byte("\n")) {
			if len(line) > 0 && line[0] != ' ' {
				l.record(string(line))
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EINVAL):
		case errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed):
			return nil
		default:
			return fmt.Errorf("read the kernel log: %w", err)
		}
	}
}

// record counts the Xid of one record, if it is one.
func (l *XidLog) record(rec string) {
	header, msg, ok := strings.Cut(rec, ";")
	if !ok {
		return
	}
	ev, ok := ParseXid(msg)
	if !ok {
		return
	}
	now := l.now()
	at := now
	fields := strings.Split(header, ",")
	if len(fields) >= 3 && !l.Boot.IsZero() {
		if usec, err := strconv.ParseInt(fields[2], 10, 64); err == nil && usec >= 0 {
			if t := l.Boot.Add(time.Duration(usec) * time.Microsecond); t.Before(now) {
				at = t
			}
		}
	}
	l.Record(ev, at)
}

// Follow reads the kernel log at path (KmsgPath when empty) until ctx ends. A host without it,
// or where bcd may not read it, has no Xid events: that is logged once, and is no error.
func (l *XidLog) Follow(ctx context.Context, path string) {
	if path == "" {
		path = KmsgPath
	}
	f, err := os.Open(path)
	if err != nil {
		l.logger().Info("kernel log unreadable: no Xid events will be reported", "path", path, "err", err)
		return
	}
	// /dev/kmsg can be polled, so the runtime's poller waits for it and Close ends the read.
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer func() {
		if stop() {
			_ = f.Close()
		}
	}()
	if err := l.Read(f); err != nil && ctx.Err() == nil {
		l.logger().Warn("kernel log: stopped reading Xid events", "path", path, "err", err)
	}
}

func (l *XidLog) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *XidLog) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// KernelBoot is when the kernel's clock started, from /proc/uptime as read at path: now less
// the uptime. The kernel log's timestamps do not count suspended time, which /proc/uptime does;
// on a server that does not suspend they agree.
func KernelBoot(path string, now time.Time) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("kernel boot time: %w", err)
	}
	up, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	secs, err := strconv.ParseFloat(up, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("kernel boot time: %s: %q is not an uptime", path, up)
	}
	return now.Add(-time.Duration(secs * float64(time.Second))), nil
}
