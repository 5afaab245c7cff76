package pgcluster

import (
	"archive/tar"
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// errUnsafeEntry marks an archive entry that would land outside the target directory.
var errUnsafeEntry = errors.New("unsafe archive entry")

// extractJar unpacks the one postgres-*.txz inside a zonky jar into dir, writing at most limit
// bytes of files. Directories are 0755 and files 0644 (0755 when executable), so another
// account can run the server from them.
func extractJar(jarPath, dir string, limit int64) error {
	zr, err := zip.OpenReader(jarPath)
	if err != nil {
		return fmt.Errorf("open jar: %w", err)
	}
	defer zr.Close()
	var txz *zip.File
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "postgres-") && strings.HasSuffix(f.Name, ".txz") {
			if txz != nil {
				return fmt.Errorf("jar holds more than one postgres-*.txz (%s, %s)", txz.Name, f.Name)
			}
			txz = f
		}
	}
	if txz == nil {
		return errors.New("jar holds no postgres-*.txz")
	}
	rc, err := txz.Open()
	if err != nil {
		return fmt.Errorf("open %s: %w", txz.Name, err)
	}
	defer rc.Close()
	prog, _ := exec.LookPath("xz")
	if err := unxz(rc, prog, func(r io.Reader) error { return extractTar(r, dir, limit) }); err != nil {
		return fmt.Errorf("%s: %w", txz.Name, err)
	}
	return nil
}

// unxz passes the decompressed stream to use. It runs the xz program prog when there is one
// (the system's): the Go decoder is many times slower, and tens of times slower under the race
// detector, which every test binary of a first run would wait for.
func unxz(r io.Reader, prog string, use func(io.Reader) error) error {
	if prog == "" {
		xr, err := xz.NewReader(r)
		if err != nil {
			return fmt.Errorf("read xz: %w", err)
		}
		return use(xr)
	}
	cmd := exec.Command(prog, "--decompress", "--stdout")
	cmd.Stdin = r
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("xz: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("xz: %w", err)
	}
	if err := use(out); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	// What follows the archive's end is padding; more than a little is not a build.
	if n, _ := io.Copy(io.Discard, io.LimitReader(out, 1<<20)); n == 1<<20 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return errors.New("more than 1 MiB of data after the archive's end")
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("xz --decompress: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// extractTar writes a tar stream's directories, regular files and symbolic links under dir.
// It refuses absolute names, names with "..", names that pass through a link, links whose
// target is absolute or climbs with "..", every other kind of entry, and more than limit
// bytes of file content.
func extractTar(r io.Reader, dir string, limit int64) error {
	tr := tar.NewReader(r)
	var written int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name == "" || name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%w %q: outside the target directory", errUnsafeEntry, hdr.Name)
		}
		path := filepath.Join(dir, name)
		if err := noLinkBetween(dir, filepath.Dir(path)); err != nil {
			return fmt.Errorf("%w %q: %w", errUnsafeEntry, hdr.Name, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if hdr.Size > limit-written {
				return fmt.Errorf("archive unpacks to more than %d bytes; refused", limit)
			}
			if err := writeFile(tr, path, hdr); err != nil {
				return err
			}
			written += hdr.Size
		case tar.TypeSymlink:
			target := filepath.FromSlash(hdr.Linkname)
			if filepath.IsAbs(target) || !filepath.IsLocal(target) || hasDotDot(target) {
				return fmt.Errorf("%w %q: link to %q leaves its directory", errUnsafeEntry, hdr.Name, hdr.Linkname)
			}
			if err := mkdirAll(filepath.Dir(path)); err != nil {
				return err
			}
			if err := os.Symlink(target, path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w %q: type %q not supported", errUnsafeEntry, hdr.Name, hdr.Typeflag)
		}
	}
}

func writeFile(r io.Reader, path string, hdr *tar.Header) error {
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%s: archive truncated", hdr.Name)
	}
	if err == nil {
		err = os.Chmod(path, mode)
	}
	return err
}

// mkdirAll creates the parents an archive omits, 0755 whatever the umask.
func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// noLinkBetween fails when a path component from root (exclusive) down to dir is a link, so
// that no entry is written through a link.
func noLinkBetween(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return err
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("goes through the link %s", p)
		}
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, string(filepath.Separator)) {
		if part == ".." {
			return true
		}
	}
	return false
}
