package client

import (
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
)

// badRequestType is the detail type the API uses for bad request fields.
const badRequestType = "google.rpc.BadRequest"

// FieldViolation is one request field the API refused, from the google.rpc.BadRequest detail it
// attaches to InvalidArgument errors (and to FailedPrecondition errors caused by one field).
type FieldViolation struct {
	// Field is the field's path: proto field names joined by dots, with [i] for a list item and
	// ["key"] for a map entry, for example "pool_id" or "tolerations[0].operator". A request
	// header is named "<Header-Name> header".
	Field string
	// Description says what is wrong with the field, for example `must be a UUID, got "x"`.
	Description string
}

// FieldViolations returns the bad fields err names, in the order the API reported them: several
// when it checked several fields of the request. It returns nil when err is not a
// *connect.Error or carries no google.rpc.BadRequest detail.
//
//	if vs := client.FieldViolations(err); len(vs) > 0 {
//		fmt.Println(vs[0].Field, vs[0].Description)
//	}
func FieldViolations(err error) []FieldViolation {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return nil
	}
	var out []FieldViolation
	for _, d := range cerr.Details() {
		if d.Type() != badRequestType {
			continue
		}
		var br errdetails.BadRequest
		if proto.Unmarshal(d.Bytes(), &br) != nil {
			continue // a detail that does not decode says nothing about fields
		}
		for _, v := range br.GetFieldViolations() {
			out = append(out, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
		}
	}
	return out
}
