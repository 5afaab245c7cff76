package apispec

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/better-compute/better-compute/internal/registry"
)

// Options shape a document.
type Options struct {
	// BasePath is where the routes are served, "/api".
	BasePath string
	// Examples adds each method's documented call (Examples) to its operation.
	Examples bool
}

// errorSchema is the component name of the Connect error body.
const errorSchema = "connect.Error"

// modulePackage finds the module that serves a method: bettercompute.modules.<module>.v<n>.
var modulePackage = regexp.MustCompile(`^bettercompute\.modules\.([a-z][a-z0-9]*)\.v[0-9]+$`)

// Build makes the OpenAPI document of every method in reg: one POST operation per short route,
// the protojson schemas of their messages, and what the registry says of each (permission,
// idempotency, audit). It fails on a streaming method, which has no plain JSON route, and, with
// opts.Examples, on a method without an example.
func Build(reg *registry.Registry, docs *Docs, opts Options) (*Document, error) {
	s := &schemas{docs: docs, components: map[string]*Schema{}}
	doc := &Document{
		OpenAPI: "3.1.0",
		Info: Info{
			Title:       "Better Compute API",
			Version:     "v1",
			Description: overview,
			License:     License{Name: "Apache 2.0", Identifier: "Apache-2.0"},
		},
		Servers:  []Server{{URL: opts.BasePath, Description: "The API's base path, on the host that serves this document."}},
		Security: []SecurityRequirement{{"apiKey": {}}},
		Paths:    map[string]*PathItem{},
		Components: Components{
			Schemas:         s.components,
			Parameters:      parameters(),
			Responses:       errorResponses(),
			SecuritySchemes: map[string]*SecurityScheme{"apiKey": {Type: "http", Scheme: "bearer", Description: "An API key, `bck_…`, sent as `Authorization: Bearer bck_…`."}},
		},
	}
	s.components[errorSchema] = connectError()
	tags := map[string]bool{}
	for _, m := range reg.Methods() {
		md := m.Descriptor
		if md.IsStreamingClient() || md.IsStreamingServer() {
			return nil, fmt.Errorf("apispec: %s streams; the document has no form for it", m.Procedure)
		}
		op := &Operation{
			OperationID: m.Group + "." + m.Name,
			Summary:     docs.Summary(md.FullName()),
			Tags:        []string{m.Group},
			RequestBody: &RequestBody{Required: true, Content: map[string]*MediaType{
				"application/json": {Schema: s.message(md.Input())},
			}},
			Responses: map[string]*Response{
				"200": {Description: "The method's response message.", Content: map[string]*MediaType{
					"application/json": {Schema: s.message(md.Output())},
				}},
			},
			Procedure:  m.Procedure,
			Permission: m.Permission,
			Public:     m.Public,
			Idempotent: m.Idempotent,
			Audited:    m.Audit,
		}
		if sub := modulePackage.FindStringSubmatch(string(md.ParentFile().Package())); sub != nil {
			op.Module = sub[1]
		}
		op.Description = describe(m, docs.Of(md.FullName()), op.Module)
		for _, code := range []string{"400", "404", "409", "429", "500", "503"} {
			op.Responses[code] = &Response{Ref: "#/components/responses/" + code}
		}
		if m.Public {
			op.Security = []SecurityRequirement{}
		} else {
			op.Parameters = append(op.Parameters, &Parameter{Ref: "#/components/parameters/XBetterCompute"})
			op.Responses["401"] = &Response{Ref: "#/components/responses/401"}
			op.Responses["403"] = &Response{Ref: "#/components/responses/403"}
		}
		if m.Idempotent {
			op.Parameters = append(op.Parameters, &Parameter{Ref: "#/components/parameters/IdempotencyKey"})
		}
		if opts.Examples {
			// Every method of this repository's API has an example; a module built outside it
			// (its file not in the embedded descriptors) may have none.
			ex, ok := Examples[m.Route()]
			if !ok && docs.Has(md.ParentFile().Path()) {
				return nil, fmt.Errorf("apispec: %s has no example in apispec.Examples", m.Route())
			}
			if ok {
				var body any
				if err := json.Unmarshal([]byte(ex.Body), &body); err != nil {
					return nil, fmt.Errorf("apispec: the example of %s: %w", m.Route(), err)
				}
				op.RequestBody.Content["application/json"].Example = body
				op.Example = &OperationExample{Body: ex.Body, Status: ex.status(), Note: ex.Note}
			}
		}
		doc.Paths["/"+m.Group+"/"+m.Name] = &PathItem{Post: op}
		if !tags[m.Group] {
			tags[m.Group] = true
			doc.Tags = append(doc.Tags, Tag{Name: m.Group, Description: docs.Of(md.Parent().FullName())})
		}
	}
	return doc, nil
}

// describe is an operation's description: the method's comment, then what the registry says.
func describe(m *registry.Method, comment, module string) string {
	var b strings.Builder
	b.WriteString(comment)
	b.WriteString("\n\n")
	if m.Public {
		b.WriteString("Public: no credential needed.")
	} else {
		fmt.Fprintf(&b, "Permission: `%s`.", m.Permission)
	}
	if m.Idempotent {
		b.WriteString(" Idempotent: a retry with the same `Idempotency-Key` returns the first response.")
	}
	if m.Audit {
		b.WriteString(" Audited.")
	}
	if module != "" {
		fmt.Fprintf(&b, " Served when the `%s` module is enabled.", module)
	}
	fmt.Fprintf(&b, " Also served at the native path `%s` (Connect, gRPC and gRPC-Web).", m.Procedure)
	return strings.TrimSpace(b.String())
}

// parameters are the headers operations share.
func parameters() map[string]*Parameter {
	return map[string]*Parameter{
		"XBetterCompute": {
			Name: "X-Better-Compute", In: "header", Required: true,
			Description: "Any value, \"1\". A browser cannot send it to another origin without CORS allowing it, so a JSON call from a page the deployment does not trust is refused.",
			Schema:      &Schema{Type: "string"},
		},
		"IdempotencyKey": {
			Name: "Idempotency-Key", In: "header",
			Description: "A key of your choosing (at most 255 characters); a retry with the same key and body returns the stored response instead of acting twice.",
			Schema:      &Schema{Type: "string"},
		},
	}
}

// errorResponses are the error statuses, each with the Connect error body; Connect's code in the
// body is the one to read, the status only classes it.
func errorResponses() map[string]*Response {
	codes := map[string]string{
		"400": "invalid_argument, failed_precondition or out_of_range: the request was refused and changed nothing; `details` name the fields.",
		"401": "unauthenticated: no credential, or one that is unknown, expired or revoked.",
		"403": "permission_denied: the caller's roles do not grant the method's permission.",
		"404": "not_found: no such resource in the caller's tenant; or unimplemented: this server does not serve the method (its module is not enabled).",
		"409": "already_exists or aborted: a conflict with the current state; read it again and retry.",
		"429": "resource_exhausted: a rate limit or quota; retry after the time in the message.",
		"500": "internal or unknown: a fault on the server's side.",
		"503": "unavailable: retry with backoff.",
	}
	out := map[string]*Response{}
	for status, desc := range codes {
		out[status] = &Response{Description: desc, Content: map[string]*MediaType{
			"application/json": {Schema: &Schema{Ref: "#/components/schemas/" + errorSchema}},
		}}
	}
	return out
}

// connectError is the body of every error: the Connect protocol's JSON error.
func connectError() *Schema {
	return &Schema{
		Type:        "object",
		Title:       "Connect error",
		Description: "The body of every error response (the Connect protocol's error). `code` is the error's class; `details` carry typed details, such as `google.rpc.BadRequest` with the fields a request got wrong (with `debug`, their JSON form).",
		Required:    []string{"code"},
		Properties: map[string]*Schema{
			"code":    {Type: "string", Enum: codeNames()},
			"message": {Type: "string", Description: "What went wrong, for people."},
			"details": {Type: "array", Items: &Schema{
				Type:     "object",
				Required: []string{"type", "value"},
				Properties: map[string]*Schema{
					"type":  {Type: "string", Description: "The detail's protobuf message name, \"google.rpc.BadRequest\"."},
					"value": {Type: "string", ContentEncoding: "base64", Description: "The detail's protobuf encoding, base64 without padding."},
					"debug": {Type: "object", Description: "The detail in JSON, for people reading it."},
				},
			}},
		},
	}
}

func codeNames() []string {
	return []string{"canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
		"permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
		"unimplemented", "internal", "unavailable", "data_loss", "unauthenticated"}
}

// Encode writes doc as indented JSON with a final newline, as docs/openapi.json holds it.
func Encode(doc *Document) ([]byte, error) {
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("apispec: encode: %w", err)
	}
	return append(body, '\n'), nil
}
