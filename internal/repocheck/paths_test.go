package repocheck_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pathRef is a repository path as comments and documents write it: one of the tree's top-level
// folders, then at least one element, at the start of a word (or after "./"), not inside a URL
// or an import path.
var pathRef = regexp.MustCompile("(?:^|[\\s`'\"(\\[]|\\./)((?:internal|cmd|client|gen|scripts|deploy|docs|proto|dashboard|examples)/[A-Za-z0-9_][A-Za-z0-9_./-]*[A-Za-z0-9_])")

// qualified is a package path and an exported name of it.
var qualified = regexp.MustCompile(`^(.*/[a-z0-9_]+)\.[A-Z]\w*$`)

// skipDirs are not the project's own prose: dependencies, build output and test artefacts (and,
// below, every hidden folder, such as a virtual environment's).
var skipDirs = map[string]bool{".git": true, "node_modules": true, "test-results": true, ".venv": true, "dist": true}

// TestNamedPathsExist walks every Go file and Markdown document and checks that each repository
// path it names exists, from the root or from the document's own folder, as a file or a folder (a Go package path may end in a file's stem, as
// in "gateway/control" for control.go, or name a test package with a _test suffix).
func TestNamedPathsExist(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || (path != root && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range pathRef.FindAllStringSubmatch(line, -1) {
				if !exists(root, m[1]) && !exists(filepath.Dir(path), m[1]) {
					missing = append(missing, rel+":"+strconv.Itoa(i+1)+": "+m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("names a path that does not exist: %s", m)
	}
}

// exists reports whether ref is a file or folder under root, allowing a trailing "." (end of a
// sentence), a file's stem (".go" left out), a test package's _test suffix and a package path
// followed by one of its names (internal/wsnet.Listener).
func exists(root, ref string) bool {
	ref = strings.TrimRight(ref, ".")
	if m := qualified.FindStringSubmatch(ref); m != nil {
		ref = m[1]
	}
	for _, c := range []string{ref, ref + ".go", strings.TrimSuffix(ref, "_test")} {
		if _, err := os.Stat(filepath.Join(root, c)); err == nil {
			return true
		}
	}
	// A glob, as in internal/modules/*/migrations.
	if strings.ContainsAny(ref, "*?[") {
		m, _ := filepath.Glob(filepath.Join(root, ref))
		return len(m) > 0
	}
	return false
}
