package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/server/registry"
)

// JSON callers are held to the schema, as Kubernetes' fieldValidation=Strict: a field the
// method's request does not have is refused with invalid_argument naming it, where Connect's own
// JSON codec drops it (a misspelt "gpuss" would run leases/create as if no count were given).
// Binary protobuf callers stay forward-compatible: protobuf keeps unknown field numbers and the
// handlers ignore them.
//
// Two layers: refuseUnknownJSON reads a plain JSON request before Connect does and names every
// unknown field, with its path, in a google.rpc.BadRequest, as any other bad field is named; the
// strict codec below is what Connect decodes JSON with, so a request the first layer does not
// read (compressed, or gRPC with JSON) is refused too, with the field in the message only.

// An answer names at most maxUnknownNamed unknown fields, each cut to maxUnknownNameBytes: the
// names are the caller's text, echoed.
const (
	maxUnknownNamed     = 20
	maxUnknownNameBytes = 200
)

// strictJSONCodec is Connect's JSON codec without DiscardUnknown.
type strictJSONCodec struct{ name string }

// strictJSONCodecs replace Connect's JSON codecs under both names it registers them by.
func strictJSONCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSONCodec{name: "json"}),
		connect.WithCodec(strictJSONCodec{name: "json; charset=utf-8"}),
	}
}

func (c strictJSONCodec) Name() string { return c.name }

func (strictJSONCodec) IsBinary() bool { return false }

func (strictJSONCodec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (strictJSONCodec) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, m); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", message, err)
	}
	return nil
}

// refuseUnknownJSON answers a JSON call to m whose request names fields m's request message does
// not have: invalid_argument, each unknown field a violation. It returns false, having answered
// nothing and left the body as it was for Connect to read, for every other request (binary,
// compressed, over the size limit, not JSON at all: Connect refuses those as it does).
func (s *Server) refuseUnknownJSON(w http.ResponseWriter, r *http.Request, m *registry.Method) bool {
	data, ok := s.jsonMessage(r)
	if !ok {
		return false
	}
	fields := unknownJSONFields(m.Descriptor.Input(), data)
	if len(fields) == 0 {
		return false
	}
	if len(fields) > maxUnknownNamed {
		fields = fields[:maxUnknownNamed]
	}
	errs := make([]error, len(fields))
	for i, f := range fields {
		errs[i] = apierr.InvalidArgument(scrub.Truncate(scrub.String(f), maxUnknownNameBytes),
			"unknown field: the request has no such field (check its spelling against the API reference)")
	}
	cerr, _ := apierr.ToConnect(apierr.Join(errs...), requestid.From(r.Context()))
	_ = s.errorWriter.Write(w, r, cerr)
	return true
}

// jsonMessage is the request message of a Connect unary call in uncompressed JSON: the body of a
// POST, the message parameter of a GET. The body is put back for Connect to read.
func (s *Server) jsonMessage(r *http.Request) ([]byte, bool) {
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		if q.Get("encoding") != "json" || q.Get("compression") != "" && q.Get("compression") != "identity" {
			return nil, false
		}
		msg := q.Get("message")
		if q.Get("base64") != "1" {
			return []byte(msg), true
		}
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(msg, "="))
		return b, err == nil
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/json" || r.Method != http.MethodPost || r.Body == nil {
		return nil, false
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, int64(s.maxRequest)+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
	if err != nil || len(data) > s.maxRequest {
		return nil, false
	}
	return data, true
}

// unknownJSONFields lists the fields of the JSON object data that md does not have, as paths of
// proto field names ending with the name as sent ("spec.gpuss"), sorted; none
// when data is not JSON (the codec says what is wrong with it).
func unknownJSONFields(md protoreflect.MessageDescriptor, data []byte) []string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil
	}
	var out []string
	walkJSON(md, v, "", &out)
	slices.Sort(out)
	return slices.Compact(out)
}

// walkJSON adds to out the unknown fields of v, the JSON form of a message md at path.
func walkJSON(md protoreflect.MessageDescriptor, v any, path string, out *[]string) {
	obj, ok := v.(map[string]any)
	// The well-known types have JSON forms of their own (Any, Struct, Timestamp, ...): protojson
	// checks them, and the strict codec refuses what it does not know there.
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return
	}
	fields := md.Fields()
	for key, val := range obj {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil {
			if !strings.HasPrefix(key, "[") { // an extension, which protojson resolves itself
				*out = append(*out, path+key)
			}
			continue
		}
		sub := path + string(fd.Name()) + "."
		switch {
		case fd.IsMap():
			if vd := fd.MapValue(); vd.Message() != nil {
				if m, ok := val.(map[string]any); ok {
					for k, e := range m {
						walkJSON(vd.Message(), e, path+string(fd.Name())+"["+k+"].", out)
					}
				}
			}
		case fd.Message() == nil:
		case fd.IsList():
			if l, ok := val.([]any); ok {
				for i, e := range l {
					walkJSON(fd.Message(), e, fmt.Sprintf("%s%s[%d].", path, fd.Name(), i), out)
				}
			}
		default:
			walkJSON(fd.Message(), val, sub, out)
		}
	}
}
