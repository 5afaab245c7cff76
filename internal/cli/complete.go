package cli

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/internal/registry"
)

// completionTimeout bounds the list call that completes an id.
const completionTimeout = 2 * time.Second

// idLists are the list methods whose items complete each id flag; --id completes from its own
// group's list method.
var idLists = map[string]string{
	"node-id":      "/nodes/list",
	"pool-id":      "/pools/list",
	"lease-id":     "/leases/list",
	"tenant-id":    "/iam/listTenants",
	"principal-id": "/iam/listPrincipals",
}

// registerCompletions completes enum flags with their values, and id flags with the ids the
// matching list method returns, their names as descriptions.
func registerCompletions(cmd *cobra.Command, rf *requestFlags, m *registry.Method, reg *registry.Registry, o *Options) {
	for _, ff := range rf.fields {
		name := flagName(ff.fd)
		if ff.fd.Kind() == protoreflect.EnumKind {
			values := enumNames(ff.fd.Enum())
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			continue
		}
		route, ok := idLists[name]
		if name == "id" {
			route, ok = "/"+m.Group+"/list", true
		}
		if !ok {
			continue
		}
		list, ok := reg.ByRoute(route)
		if !ok {
			continue
		}
		_ = cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeIDs(cmd.Context(), list, o), cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// completeIDs lists the ids of one page of list; any error completes nothing.
func completeIDs(ctx context.Context, list *registry.Method, o *Options) []cobra.Completion {
	t, err := o.Resolver.Resolve()
	if err != nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	md := list.Descriptor
	c := client.NewMethodClient(t.URL, md, client.WithAPIKey(t.APIKey), client.WithHTTPClient(o.HTTPClient), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	res, err := c.CallUnary(ctx, connect.NewRequest(dynamicpb.NewMessage(md.Input())))
	if err != nil {
		return nil
	}
	items := listField(md.Output())
	if items == nil {
		return nil
	}
	var out []cobra.Completion
	l := res.Msg.Get(items).List()
	for i := range l.Len() {
		item := l.Get(i).Message()
		id := cell(item, "id")
		if id == "" {
			continue
		}
		desc := ""
		for _, f := range []string{"name", "hostname", "description"} {
			if desc = cell(item, f); desc != "" {
				break
			}
		}
		out = append(out, cobra.CompletionWithDesc(id, desc))
	}
	return out
}
