package event

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Spec describes one entry of the catalog, for docs/events.md and for checking names.
type Spec struct {
	// Name is the event type, for example "node.cordoned"; for a family (Family), its pattern,
	// "node.<report>".
	Name string
	// GoType is the Go type's name in this package, whose doc comment says when it is emitted.
	GoType string
	// Subject is the pattern of its subject, for example "node/<id>".
	Subject string
	// Fields are the payload's keys; none for a family, whose payload is the daemon's.
	Fields []Field
	// Family marks the daemon's reports, NodeReported: many types under one pattern.
	Family bool
}

// Field is one key of a payload.
type Field struct {
	// Name is the JSON key; a nested object's keys are "parent.child".
	Name string
	// GoName is the struct field's name, whose doc comment describes it.
	GoName string
	// Owner is the Go type that declares the field (an embedded payload, or a nested object).
	Owner string
	// Type is its JSON type, for example "string (UUID)".
	Type string
	// Optional marks a key left out when empty.
	Optional bool
}

// all is every event of the catalog, as zero values, in the order docs/events.md lists them.
var all = []Event{
	NodeJoined{}, NodeReady{}, NodeCordoned{}, NodeUncordoned{}, NodeDraining{}, NodeDrained{}, NodeRetired{},
	NodeRevoked{}, NodeLabeled{}, NodeSpecUpdated{}, NodeSpecApplied{}, NodeSpecFailed{},
	NodeOnline{}, NodeOffline{}, NodeInventoryChanged{}, NodeGPUQuarantined{}, NodeGPUReleased{}, NodeReported{},
	CommandCreated{}, CommandSucceeded{}, CommandFailed{}, CommandCancelled{},
	PoolCreated{}, PoolUpdated{}, PoolDeleted{}, PoolQuotaSet{}, PoolGranted{}, PoolGrantRevoked{},
	PoolScaledUp{}, PoolScaledDown{}, PoolScaleBlocked{},
	MachineOrphanFound{}, MachineOrphanRemoved{},
	LeaseCreated{}, LeasePlaced{}, LeaseAtRisk{}, LeaseExtended{}, LeaseReleased{}, LeaseExpired{}, LeasePreempted{}, LeaseFailed{},
	LeaseGPUUnhealthy{}, LeaseIdle{}, LeaseLent{}, LeaseWoke{},
	GPUHealthy{}, GPUDegraded{}, GPUUnhealthy{},
	RemediationStarted{}, RemediationStep{}, RemediationSucceeded{}, RemediationCancelled{}, GPUServiceRequired{},
	LeaseNodeRemediation{},
	ReservationCreated{}, ReservationCancelled{},
	TenantCreated{}, TenantSuspended{}, TenantResumed{}, TenantDeleted{},
	SecretCreated{}, SecretUpdated{}, SecretDeleted{},
	WebhookCreated{}, WebhookDeleted{}, WebhookReplayed{}, WebhookFailing{}, WebhookTest{},
	WorkflowCreated{}, WorkflowPaused{}, WorkflowResumed{}, WorkflowSucceeded{}, WorkflowFailed{}, WorkflowCancelled{},
	WorkflowNodeStarted{}, WorkflowNodeSucceeded{}, WorkflowNodeFailed{},
}

// catalog is all described.
var catalog = func() []Spec {
	out := make([]Spec, len(all))
	for i, ev := range all {
		t := reflect.TypeOf(ev)
		s := Spec{Name: ev.Type(), GoType: t.Name(), Subject: strings.ReplaceAll(ev.Subject(), uuid.Nil.String(), "<id>")}
		if _, ok := ev.(NodeReported); ok {
			s.Name, s.Family = ReportPrefix+"<report>", true
		} else {
			s.Fields = fields(t, "")
		}
		out[i] = s
	}
	return out
}()

// Catalog returns every event, in the order docs/events.md lists them.
func Catalog() []Spec { return slices.Clone(catalog) }

// Known reports whether typ is an event type a webhook can subscribe to: an event of the catalog
// or a daemon's report ("node." and a name ValidReport accepts).
func Known(typ string) bool {
	if slices.ContainsFunc(catalog, func(s Spec) bool { return !s.Family && s.Name == typ }) {
		return true
	}
	report, ok := strings.CutPrefix(typ, ReportPrefix)
	return ok && ValidReport(report)
}

var (
	uuidType    = reflect.TypeFor[uuid.UUID]()
	timeType    = reflect.TypeFor[time.Time]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
)

// fields lists the JSON keys of struct t as encoding/json writes them: embedded structs' keys in
// place, nested structs' keys under their parent's.
func fields(t reflect.Type, prefix string) []Field {
	var out []Field
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			out = append(out, fields(f.Type, prefix)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, Field{Name: prefix + name, GoName: f.Name, Owner: t.Name(), Type: jsonType(ft), Optional: strings.Contains(opts, "omitempty")})
		if ft.Kind() == reflect.Struct && ft != uuidType && ft != timeType {
			out = append(out, fields(ft, prefix+name+".")...)
		}
	}
	return out
}

// jsonType names the JSON encoding/json gives a value of t.
func jsonType(t reflect.Type) string {
	switch {
	case t == uuidType:
		return "string (UUID)"
	case t == timeType:
		return "string (RFC 3339 time)"
	case t == rawJSONType:
		return "object"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array of " + jsonType(t.Elem())
	case reflect.Map:
		return "object of " + jsonType(t.Elem())
	case reflect.Pointer:
		return jsonType(t.Elem())
	default:
		return "object"
	}
}
