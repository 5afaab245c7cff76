package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/internal/apispec"
	"github.com/better-compute/better-compute/internal/registry"
)

// Paging limits of --all.
const (
	pageTokenField = "page_token"
	// maxItems bounds what --all collects.
	maxItems = 100_000
)

// methodFlags are the flags every method command has besides its request's.
type methodFlags struct {
	output, codec string
	all           bool
	timeout       time.Duration
}

// methodCommand is `better-compute <group> <name>`, which calls m.
func methodCommand(m *registry.Method, reg *registry.Registry, docs *apispec.Docs, o *Options) *cobra.Command {
	md := m.Descriptor
	rf := &requestFlags{md: md.Input()}
	mf := &methodFlags{}
	comment := docs.Of(md.FullName())
	short := summary(docs, md)
	if short == "" {
		short = "Call " + m.Route()
	}
	cmd := &cobra.Command{
		Use:   kebab(m.Name),
		Short: short,
		Long:  strings.TrimSpace(comment + "\n\n" + methodFacts(m) + "\n\n" + ExitCodesHelp),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(mf.output); err != nil {
				return err
			}
			if mf.codec != "proto" && mf.codec != "json" {
				return usageError(fmt.Errorf("--codec must be proto or json, got %q", mf.codec))
			}
			req, err := rf.build(cmd.Flags(), cmd.InOrStdin())
			if err != nil {
				return err
			}
			t, err := o.Resolver.resolve(!m.Public)
			if err != nil {
				return err
			}
			copts := []client.Option{client.WithAPIKey(t.APIKey), client.WithHTTPClient(o.HTTPClient)}
			if mf.codec == "json" {
				copts = append(copts, client.WithConnectOptions(connect.WithProtoJSON()))
			}
			c := client.NewMethodClient(t.URL, md, copts...)
			res, more, err := call(cmd.Context(), c, md, req, mf)
			if err != nil {
				return err
			}
			if err := printResponse(cmd.OutOrStdout(), mf.output, res); err != nil {
				return err
			}
			if more != "" && mf.output == outputTable {
				fmt.Fprintf(cmd.ErrOrStderr(), "More results exist: add --all, or --page-token %s for the next page.\n", more)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	rf.add(fs, docs)
	addOutputFlag(fs, &mf.output)
	fs.StringVar(&mf.codec, "codec", "proto", "wire encoding of the call: proto (binary) or json")
	fs.DurationVar(&mf.timeout, "request-timeout", 30*time.Second, "how long to wait for each call, retries included")
	if paged(md) {
		fs.BoolVar(&mf.all, "all", false, fmt.Sprintf("follow nextPageToken to the last page (at most %d items)", maxItems))
	}
	registerCompletions(cmd, rf, m, reg, o)
	return cmd
}

// methodFacts are the lines of a method's help about its permission and retries.
func methodFacts(m *registry.Method) string {
	perm := "Permission: " + m.Permission
	if m.Public {
		perm = "Public: no API key needed."
	}
	idem := "Idempotent: no; not retried after a failure."
	if m.Idempotent {
		idem = "Idempotent: yes; retried with one Idempotency-Key when the API is unavailable."
	}
	return perm + "\n" + idem + "\nRoute: " + m.Route()
}

// paged says whether md's request takes a page token and its response returns the next one.
func paged(md protoreflect.MethodDescriptor) bool {
	return md.Input().Fields().ByName(pageTokenField) != nil && md.Output().Fields().ByName(nextPageTokenField) != nil && listField(md.Output()) != nil
}

// listField is the first repeated message field of md, the items of a list response.
func listField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); isMessageList(fd) {
			return fd
		}
	}
	return nil
}

// call sends req; with --all it follows the pages, appending their items to the first
// response's. more is the token of a page not fetched.
func call(ctx context.Context, c *connect.Client[dynamicpb.Message, dynamicpb.Message], method protoreflect.MethodDescriptor, req *dynamicpb.Message, mf *methodFlags) (res *dynamicpb.Message, more string, err error) {
	once := func(req *dynamicpb.Message) (*dynamicpb.Message, error) {
		ctx, cancel := context.WithTimeout(ctx, mf.timeout)
		defer cancel()
		r, err := c.CallUnary(ctx, connect.NewRequest(req))
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
				return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("no answer within --request-timeout %s", mf.timeout))
			}
			return nil, err
		}
		return r.Msg, nil
	}
	res, err = once(req)
	if err != nil {
		return nil, "", err
	}
	md := req.Descriptor()
	out := res.Descriptor()
	if !paged(method) {
		return res, "", nil
	}
	tokenIn, tokenOut, items := md.Fields().ByName(pageTokenField), out.Fields().ByName(nextPageTokenField), listField(out)
	next := res.Get(tokenOut).String()
	if !mf.all {
		return res, next, nil
	}
	all := res.Mutable(items).List()
	for next != "" {
		if all.Len() >= maxItems {
			return nil, "", fmt.Errorf("--all: more than %d items; narrow the request", maxItems)
		}
		req.Set(tokenIn, protoreflect.ValueOfString(next))
		page, err := once(req)
		if err != nil {
			return nil, "", err
		}
		l := page.Get(items).List()
		for i := range l.Len() {
			all.Append(l.Get(i))
		}
		next = page.Get(tokenOut).String()
	}
	res.Clear(tokenOut)
	return res, "", nil
}
