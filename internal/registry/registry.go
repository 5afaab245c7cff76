// Package registry builds the one list of API methods from the protobuf descriptors.
//
// Every RPC of an API service carries the option (bettercompute.api.v1.method); routing, IAM,
// audit, idempotency, doctor and the docs all read the registry built from those options, and
// nothing keeps a second list by hand.
package registry

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	apiv1 "github.com/better-compute/better-compute/gen/go/bettercompute/api/v1"
)

// Method is one API method and how it is exposed and guarded.
type Method struct {
	// Procedure is the native Connect/gRPC path, "/bettercompute.system.v1.SystemService/Info".
	Procedure string
	// Group and Name make the short route {basePath}/{Group}/{Name}.
	Group, Name string
	// Permission is what a caller must hold; empty for public methods.
	Permission string
	// Public methods answer without a credential and without the X-Better-Compute header.
	Public bool
	// Idempotent methods accept an Idempotency-Key header.
	Idempotent bool
	// Audit methods record an audit row in the transaction of their change.
	Audit bool
	// Expensive methods cost work that grows with the caller's data; the guard bounds how many
	// of them each tenant runs at once.
	Expensive bool
	// Descriptor describes the RPC.
	Descriptor protoreflect.MethodDescriptor
}

// Route is the short path below the base path, "/system/info".
func (m *Method) Route() string { return "/" + m.Group + "/" + m.Name }

// Registry holds every API method.
type Registry struct {
	methods     []*Method
	byProcedure map[string]*Method
	byRoute     map[string]*Method
}

// apiPackage matches the packages that hold API services; the daemon protocol is not one.
var apiPackage = regexp.MustCompile(`^bettercompute\.[a-z][a-z0-9]*\.v[0-9]+$`)

// internalPackages match apiPackage but hold no API service: the options every method declares,
// the daemon protocol (gateway and bcd) and the gateway's internal control API (API and
// gateway, internal identities only). Their services have no (bettercompute.api.v1.method)
// option and must never be routed, documented or offered by the CLI.
var internalPackages = []string{"bettercompute.api.", "bettercompute.daemon.", "bettercompute.gateway."}

// isAPIPackage says whether pkg holds API services.
func isAPIPackage(pkg string) bool {
	if !apiPackage.MatchString(pkg) {
		return false
	}
	for _, p := range internalPackages {
		if strings.HasPrefix(pkg, p) {
			return false
		}
	}
	return true
}

var segment = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

var permission = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*\.[a-z][a-zA-Z0-9]*$`)

// modulePackage matches the packages of modules' API services
// (bettercompute.modules.<module>.v<n>): they enter a registry only when their module is enabled.
var modulePackage = regexp.MustCompile(`^bettercompute\.modules\.[a-z][a-z0-9]*\.v[0-9]+$`)

// FromGlobal builds the registry from every core file linked into the binary, and the files of
// the enabled modules' services.
func FromGlobal(modules ...protoreflect.FileDescriptor) (*Registry, error) {
	return Build(protoregistry.GlobalFiles, modules...)
}

// Build collects the API methods of the core files among files, and of modules: files of module
// packages, which files may also hold (they are skipped there, so a module compiled into the
// binary but not enabled has no methods). It fails on a method without options, a route or
// procedure used twice, a malformed group, name or permission, or a non-public method without
// a permission, so a mistake in a .proto stops the server at start rather than opening a hole.
func Build(files *protoregistry.Files, modules ...protoreflect.FileDescriptor) (*Registry, error) {
	r := &Registry{byProcedure: map[string]*Method{}, byRoute: map[string]*Method{}}
	var errs []string
	add := func(fd protoreflect.FileDescriptor) {
		svcs := fd.Services()
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			mds := sd.Methods()
			for j := range mds.Len() {
				m, err := methodOf(sd, mds.Get(j))
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				if prev, dup := r.byRoute[m.Route()]; dup {
					errs = append(errs, fmt.Sprintf("route %s is declared by both %s and %s", m.Route(), prev.Procedure, m.Procedure))
					continue
				}
				r.byRoute[m.Route()] = m
				r.byProcedure[m.Procedure] = m
				r.methods = append(r.methods, m)
			}
		}
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		pkg := string(fd.Package())
		if isAPIPackage(pkg) {
			add(fd)
		}
		return true
	})
	for _, fd := range modules {
		if !modulePackage.MatchString(string(fd.Package())) {
			errs = append(errs, fmt.Sprintf("%s: a module's services must be in a package bettercompute.modules.<module>.v<n>, not %s", fd.Path(), fd.Package()))
			continue
		}
		add(fd)
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("method registry: %s", strings.Join(errs, "; "))
	}
	sort.Slice(r.methods, func(i, j int) bool { return r.methods[i].Route() < r.methods[j].Route() })
	return r, nil
}

func methodOf(sd protoreflect.ServiceDescriptor, md protoreflect.MethodDescriptor) (*Method, error) {
	procedure := "/" + string(sd.FullName()) + "/" + string(md.Name())
	opts, ok := proto.GetExtension(md.Options(), apiv1.E_Method).(*apiv1.Method)
	if !ok || opts == nil || (opts.GetGroup() == "" && opts.GetName() == "") {
		return nil, fmt.Errorf("%s has no (bettercompute.api.v1.method) option", procedure)
	}
	m := &Method{
		Procedure:  procedure,
		Group:      opts.GetGroup(),
		Name:       opts.GetName(),
		Permission: opts.GetPermission(),
		Public:     opts.GetPublic(),
		Idempotent: opts.GetIdempotent(),
		Audit:      opts.GetAudit(),
		Expensive:  opts.GetExpensive(),
		Descriptor: md,
	}
	switch {
	case !segment.MatchString(m.Group):
		return nil, fmt.Errorf("%s: group %q must be lower camel case", procedure, m.Group)
	case !segment.MatchString(m.Name):
		return nil, fmt.Errorf("%s: name %q must be lower camel case", procedure, m.Name)
	case !m.Public && m.Permission == "":
		return nil, fmt.Errorf("%s: a method that is not public needs a permission", procedure)
	case m.Permission != "" && !permission.MatchString(m.Permission):
		return nil, fmt.Errorf("%s: permission %q must look like group.verb", procedure, m.Permission)
	}
	return m, nil
}

// Methods lists every method, sorted by route.
func (r *Registry) Methods() []*Method { return r.methods }

// ByProcedure finds a method by its native path.
func (r *Registry) ByProcedure(procedure string) (*Method, bool) {
	m, ok := r.byProcedure[procedure]
	return m, ok
}

// ByRoute finds a method by its short route, "/system/info".
func (r *Registry) ByRoute(route string) (*Method, bool) {
	m, ok := r.byRoute[route]
	return m, ok
}
