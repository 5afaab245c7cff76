package host_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

func TestParseXid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  string
		want host.XidEvent
		ok   bool
	}{
		{
			msg:  "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
			want: host.XidEvent{PCI: "0000:18:00", Xid: 79, Message: "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus."},
			ok:   true,
		},
		{
			msg:  "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
			want: host.XidEvent{PCI: "0000:18:00", Xid: 13, Message: "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"},
			ok:   true,
		},
		{
			msg:  "NVRM: Xid (PCI:0000:ab:00 GPU-I:05): 43, pid=99, name=train, Ch 00000008\n",
			want: host.XidEvent{PCI: "0000:ab:00", Xid: 43, Message: "NVRM: Xid (PCI:0000:ab:00 GPU-I:05): 43, pid=99, name=train, Ch 00000008"},
			ok:   true,
		},
		{msg: "NVRM: Xid (PCI:0000:18:00): 94", want: host.XidEvent{PCI: "0000:18:00", Xid: 94, Message: "NVRM: Xid (PCI:0000:18:00): 94"}, ok: true},
		{msg: "NVRM: GPU at PCI:0000:18:00: GPU-3f2a7c1e has fallen off the bus."},
		{msg: "NVRM: Xid (PCI:zz:18:00): 79, x"},
		{msg: "NVRM: Xid (): 79, x"},
		{msg: "NVRM: Xid (PCI:0000:18:00): many, x"},
		{msg: "usb 1-1: new high-speed USB device number 2"},
	} {
		got, ok := host.ParseXid(tc.msg)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseXid(%q) = %+v, %v; want %+v, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

// kmsgReader gives one record per read, as /dev/kmsg does; an error in the list is returned
// in its turn.
type kmsgReader struct{ reads []any }

func (r *kmsgReader) Read(p []byte) (int, error) {
	if len(r.reads) == 0 {
		return 0, io.EOF
	}
	next := r.reads[0]
	r.reads = r.reads[1:]
	if err, ok := next.(error); ok {
		return 0, err
	}
	return copy(p, next.(string)), nil
}

// TestXidLogRead: records are dated from the boot time, counted per device and Xid (the device
// compared by number), other records and continuation lines passed over, and records lost
// to the ring buffer (EPIPE) or too large (EINVAL) skipped without ending the reading.
func TestXidLogRead(t *testing.T) {
	t.Parallel()
	boot := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	now := boot.Add(time.Hour)
	log := &host.XidLog{Boot: boot, Now: func() time.Time { return now }}
	r := &kmsgReader{reads: []any{
		"6,100,5000000,-;usb 1-1: new high-speed USB device number 2\n",
		"3,101,60000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n",
		&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EPIPE},
		"3,140,120000000,-;NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception\n",
		&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EINVAL},
		"3,141,180000000,-;NVRM: Xid (PCI:00000000:18:00): 79, pid=1300, name=python, GPU has fallen off the bus.\n",
		// A timestamp past now (a clock that moved) is dated now.
		"3,142,7200000000,-;NVRM: Xid (PCI:0000:2a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n",
	}}
	if err := log.Read(r); err != nil {
		t.Fatal(err)
	}
	got := log.Counts()
	want := []host.XidCount{
		{PCI: "0000:18:00", Xid: 13, Count: 1, FirstSeen: boot.Add(2 * time.Minute), LastSeen: boot.Add(2 * time.Minute),
			Detail: "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception"},
		{PCI: "0000:18:00", Xid: 79, Count: 2, FirstSeen: boot.Add(time.Minute), LastSeen: boot.Add(3 * time.Minute),
			Detail: "NVRM: Xid (PCI:00000000:18:00): 79, pid=1300, name=python, GPU has fallen off the bus."},
		{PCI: "0000:2a:00", Xid: 48, Count: 1, FirstSeen: now, LastSeen: now,
			Detail: "NVRM: Xid (PCI:0000:2a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts\n got %+v\nwant %+v", got, want)
	}
	select {
	case <-log.Changed():
	default:
		t.Error("no change notice after Xids were counted")
	}

	// Another error ends the reading, and says so.
	err := log.Read(&kmsgReader{reads: []any{&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EIO}}})
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "kernel log") {
		t.Errorf("read error: %v", err)
	}
}

// TestXidLogBounds: at most MaxXidsPerGPU distinct Xids per device and MaxXidGPUs devices are
// counted; a known one still counts, and a detail is cut to MaxDetailBytes on a rune boundary.
func TestXidLogBounds(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		event   func(i int) host.XidEvent
		counted int
	}{
		{"xids per GPU", func(i int) host.XidEvent { return host.XidEvent{PCI: "0000:18:00", Xid: int64(i + 1)} }, host.MaxXidsPerGPU},
		{"GPUs", func(i int) host.XidEvent { return host.XidEvent{PCI: fmt.Sprintf("0001:%02x:00", i), Xid: 79} }, host.MaxXidGPUs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log host.XidLog
			for i := range tc.counted + 6 {
				if got := log.Record(tc.event(i), at); got != (i < tc.counted) {
					t.Fatalf("event %d counted %v", i, got)
				}
			}
			if !log.Record(tc.event(0), at) {
				t.Error("a known Xid past the bound is not counted")
			}
			if n := len(log.Counts()); n != tc.counted {
				t.Errorf("%d counts; want %d", n, tc.counted)
			}
		})
	}
	var log host.XidLog
	long := "NVRM: Xid (PCI:0000:18:00): 31, " + strings.Repeat("é", gpuhealth.MaxDetailBytes)
	log.Record(host.XidEvent{PCI: "0000:18:00", Xid: 31, Message: long}, at)
	if d := log.Counts()[0].Detail; len(d) > gpuhealth.MaxDetailBytes || !strings.HasPrefix(long, d) || len(d) < gpuhealth.MaxDetailBytes-1 {
		t.Errorf("detail of %d bytes: %q", len(d), d)
	}
}

// TestXidLogFollowWithoutKmsg: a host without the kernel log (or without permission) has no
// Xids, and that is no error.
func TestXidLogFollowWithoutKmsg(t *testing.T) {
	t.Parallel()
	var log host.XidLog
	log.Follow(t.Context(), filepath.Join(t.TempDir(), "kmsg"))
	if n := len(log.Counts()); n != 0 {
		t.Errorf("%d counts", n)
	}
}

func TestKernelBoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		content string
		want    time.Time
		ok      bool
	}{
		{"3600.50 7100.00\n", now.Add(-3600500 * time.Millisecond), true},
		{"soon\n", time.Time{}, false},
	} {
		path := filepath.Join(dir, "uptime")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := host.KernelBoot(path, now)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("KernelBoot(%q) = %v, %v; want %v", tc.content, got, err, tc.want)
		}
	}
	if _, err := host.KernelBoot(filepath.Join(dir, "none"), now); err == nil {
		t.Error("no error for a missing /proc/uptime")
	}
}
