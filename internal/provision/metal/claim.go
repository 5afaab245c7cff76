package metal

import (
	"strings"

	"github.com/better-compute/better-compute/internal/provision"
)

// claimPrefix starts a claim: better-compute=<deployment>/<machine id>.
const claimPrefix = "better-compute="

// claim is the record, on the BMC, that a system is a machine's: in virtualMedia mode the
// fragment of the inserted image's URL (a fragment is never sent when the BMC fetches the
// image, and the BMC shows the URL as inserted), in pxe mode the system's AssetTag. A system
// without one is free.
type claim struct {
	Deployment string
	Machine    string
}

func (c claim) String() string { return claimPrefix + c.Deployment + "/" + c.Machine }

// tags are the provider tags the claim stands for.
func (c claim) tags() map[string]string {
	return map[string]string{provision.TagMachine: c.Machine, provision.TagDeployment: c.Deployment}
}

// parseClaim reads a claim; ok is false for anything else (a free system, or one someone else
// put media or an asset tag on).
func parseClaim(s string) (claim, bool) {
	rest, ok := strings.CutPrefix(s, claimPrefix)
	if !ok {
		return claim{}, false
	}
	dep, machine, ok := strings.Cut(rest, "/")
	if !ok || dep == "" || machine == "" {
		return claim{}, false
	}
	return claim{Deployment: dep, Machine: machine}, true
}

// mediaClaim is the claim in a virtual media image URL's fragment.
func mediaClaim(image string) (claim, bool) {
	_, frag, ok := strings.Cut(image, "#")
	if !ok {
		return claim{}, false
	}
	return parseClaim(frag)
}
