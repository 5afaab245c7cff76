// Package buildinfo says which build of Better Compute is running.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/better-compute/better-compute/internal/buildinfo.Version=v0.1.0".
var Version = "devel"

// Build describes the build: the VCS revision (with "+dirty" when the tree was modified) when
// the binary was built from a checkout with VCS stamping, and the Go version.
func Build() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	parts := []string{info.GoVersion}
	if rev != "" {
		parts = append([]string{fmt.Sprintf("%.12s%s", rev, dirty)}, parts...)
	}
	return strings.Join(parts, " ")
}
