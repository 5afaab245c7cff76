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
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/scrub"
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
// proto field names ending with the name as sent ("spec.gpuss"), sorted, at most
// maxUnknownNamed; none when data is not JSON (the codec says what is wrong with it). It reads
// data as a stream of tokens, holding no tree of it: a 4 MiB body costs no more than its tokens.
func unknownJSONFields(md protoreflect.MessageDescriptor, data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := jsonWalk{dec: dec}
	if err := w.value(md, ""); err != nil && !errors.Is(err, errEnough) {
		return nil
	}
	slices.Sort(w.unknown)
	return slices.Compact(w.unknown)
}

// errEnough stops a walk that found maxUnknownNamed unknown fields.
var errEnough = errors.New("enough unknown fields")

// jsonWalk reads a JSON value against a message descriptor, collecting unknown fields.
type jsonWalk struct {
	dec     *json.Decoder
	unknown []string
}

// value reads the next value, the JSON form of a message md at path (nil md: any value, skipped).
func (w *jsonWalk) value(md protoreflect.MessageDescriptor, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	switch {
	case !ok:
		return nil // a scalar or null
	case d == '[':
		return w.rest(']')
	// The well-known types have JSON forms of their own (Any, Struct, Timestamp, ...): protojson
	// checks them, and the strict codec refuses what it does not know there.
	case md == nil || strings.HasPrefix(string(md.FullName()), "google.protobuf."):
		return w.rest('}')
	}
	fields := md.Fields()
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		switch {
		case fd == nil && strings.HasPrefix(key, "["): // an extension, which protojson resolves itself
			err = w.value(nil, "")
		case fd == nil:
			if w.unknown = append(w.unknown, path+key); len(w.unknown) >= maxUnknownNamed {
				return errEnough
			}
			err = w.value(nil, "")
		case fd.IsMap() && fd.MapValue().Message() != nil:
			err = w.container('{', fd.MapValue().Message(), path+string(fd.Name()))
		case fd.IsList() && fd.Message() != nil:
			err = w.container('[', fd.Message(), path+string(fd.Name()))
		case fd.Message() != nil && !fd.IsMap():
			err = w.value(fd.Message(), path+string(fd.Name())+".")
		default:
			err = w.value(nil, "")
		}
		if err != nil {
			return err
		}
	}
	_, err = w.dec.Token() // the closing brace
	return err
}

// container reads a map's object or a list's array whose values are messages md, at path: each
// value's fields are named path[key]. or path[i]. (another JSON value, null, is read and left).
func (w *jsonWalk) container(open json.Delim, md protoreflect.MessageDescriptor, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch d, _ := tok.(json.Delim); {
	case d == open:
	case d == '{':
		return w.rest('}')
	case d == '[':
		return w.rest(']')
	default:
		return nil // null, or a scalar the codec refuses
	}
	for i := 0; w.dec.More(); i++ {
		elem := fmt.Sprintf("%s[%d].", path, i)
		if open == '{' {
			tok, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			elem = path + "[" + key + "]."
		}
		if err := w.value(md, elem); err != nil {
			return err
		}
	}
	_, err = w.dec.Token()
	return err
}

// rest reads the remaining values of an object (keys and values) or array just opened, up to
// and including its closing delimiter.
func (w *jsonWalk) rest(closing json.Delim) error {
	for w.dec.More() {
		if closing == '}' {
			if _, err := w.dec.Token(); err != nil { // the key
				return err
			}
		}
		if err := w.value(nil, ""); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}
