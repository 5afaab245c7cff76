package provision

import (
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestClassValidation: names, providers, parameters and credentials are checked and bounded;
// credentials are sealed, never returned; a class in use cannot be deleted.
func TestClassValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Providers{"keyed": func(json.RawMessage, []byte, provision.Egress) (provision.Provider, error) { return nil, nil }})
	ctx := t.Context()
	params := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		what string
		req  *provisionmodulev1.CreateClassRequest
	}{
		{"bad name", &provisionmodulev1.CreateClassRequest{Name: "Small", Provider: simprovider.Kind}},
		{"long name", &provisionmodulev1.CreateClassRequest{Name: strings.Repeat("a", 64), Provider: simprovider.Kind}},
		{"unknown provider", &provisionmodulev1.CreateClassRequest{Name: "x", Provider: "ec2"}},
		{"params the provider refuses", &provisionmodulev1.CreateClassRequest{Name: "x", Provider: simprovider.Kind, Params: params(map[string]any{"bogus": 1})}},
		{"bad boot delay", &provisionmodulev1.CreateClassRequest{Name: "x", Provider: simprovider.Kind, Params: params(map[string]any{"bootDelay": "forever"})}},
		{"params too large", &provisionmodulev1.CreateClassRequest{Name: "x", Provider: "keyed", Params: params(map[string]any{"a": strings.Repeat("x", MaxParamsBytes)})}},
		{"credentials too large", &provisionmodulev1.CreateClassRequest{Name: "x", Provider: "keyed", Credentials: make([]byte, MaxCredentialsBytes+1)}},
	} {
		_, err := e.client.CreateClass(ctx, tc.req)
		wantCode(t, err, connect.CodeInvalidArgument, tc.what)
	}

	res, err := e.client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{
		Name: "keyed", Provider: "keyed", Params: params(map[string]any{"region": "eu"}), Credentials: []byte("hunter2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.GetClass(); !c.GetHasCredentials() || c.GetParams().GetFields()["region"].GetStringValue() != "eu" {
		t.Fatalf("class %v", c)
	}
	_, err = e.client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "keyed", Provider: "keyed"})
	wantCode(t, err, connect.CodeAlreadyExists, "a second class of the same name")
	root, err := auth.EnsureRootTenant(ctx, e.Pool)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := provisiondb.New(e.Pool).GetClass(ctx, provisiondb.GetClassParams{TenantID: root.ID, Name: "keyed"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored.Credentials), "hunter2") {
		t.Fatal("credentials stored in the clear")
	}
	s, _ := newSealers(servertest.Secret)
	if got, err := s.credentials.Open(stored.Credentials, classAAD(root.ID, "keyed")); err != nil || string(got) != "hunter2" {
		t.Fatalf("sealed credentials open to %q, %v", got, err)
	}

	e.simClass(t, "small")
	if _, err := e.client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "small", Name: "m1"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.DeleteClass(ctx, &provisionmodulev1.DeleteClassRequest{Name: "small"})
	wantCode(t, err, connect.CodeFailedPrecondition, "deleting a class in use")
	if _, err := e.client.DeleteClass(ctx, &provisionmodulev1.DeleteClassRequest{Name: "keyed"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetClass(ctx, &provisionmodulev1.GetClassRequest{Name: "keyed"})
	wantCode(t, err, connect.CodeNotFound, "a deleted class")
	list, err := e.client.ListClasses(ctx, &provisionmodulev1.ListClassesRequest{})
	if err != nil || len(list.GetClasses()) != 1 || list.GetClasses()[0].GetName() != "small" {
		t.Fatalf("classes %v, %v", list.GetClasses(), err)
	}
}

// TestMachinesValidationAndTenantScope: machine names, classes and the tenant's cap are
// checked; another tenant sees none of the machines or classes and cannot act on them;
// deleting twice changes nothing.
func TestMachinesValidationAndTenantScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := t.Context()
	e.simClass(t, "small")
	_, err := e.client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "small", Name: "-bad"})
	wantCode(t, err, connect.CodeInvalidArgument, "a bad name")
	_, err = e.client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "nope", Name: "m1"})
	wantCode(t, err, connect.CodeInvalidArgument, "an unknown class")
	id := e.createMachine(t, "small", "m1")
	_, err = e.client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "small", Name: "m1"})
	wantCode(t, err, connect.CodeAlreadyExists, "a second machine of the same name")
	e.createMachine(t, "small", "m2")
	e.createMachine(t, "small", "m3")
	_, err = e.client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "small", Name: "m4"})
	wantCode(t, err, connect.CodeResourceExhausted, "a machine over the tenant's cap")

	other := e.childTenant(t, "team-b")
	_, err = other.GetMachine(ctx, &provisionmodulev1.GetMachineRequest{Id: id.String()})
	wantCode(t, err, connect.CodeNotFound, "another tenant's machine")
	_, err = other.DeleteMachine(ctx, &provisionmodulev1.DeleteMachineRequest{Id: id.String()})
	wantCode(t, err, connect.CodeNotFound, "deleting another tenant's machine")
	_, err = other.PowerCycleMachine(ctx, &provisionmodulev1.PowerCycleMachineRequest{Id: id.String()})
	wantCode(t, err, connect.CodeNotFound, "power cycling another tenant's machine")
	_, err = other.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "small", Name: "m1"})
	wantCode(t, err, connect.CodeInvalidArgument, "a machine of another tenant's class")
	if l, err := other.ListMachines(ctx, &provisionmodulev1.ListMachinesRequest{}); err != nil || len(l.GetMachines()) != 0 {
		t.Fatalf("another tenant lists %v, %v", l.GetMachines(), err)
	}
	if l, err := other.ListClasses(ctx, &provisionmodulev1.ListClassesRequest{}); err != nil || len(l.GetClasses()) != 0 {
		t.Fatalf("another tenant lists %v, %v", l.GetClasses(), err)
	}

	_, err = e.client.PowerCycleMachine(ctx, &provisionmodulev1.PowerCycleMachineRequest{Id: id.String()})
	wantCode(t, err, connect.CodeFailedPrecondition, "power cycling a requested machine")
	for range 2 {
		res, err := e.client.DeleteMachine(ctx, &provisionmodulev1.DeleteMachineRequest{Id: id.String()})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetMachine().GetState() != provisionmodulev1.MachineState_MACHINE_STATE_DELETING {
			t.Fatalf("deleted machine is %v", res.GetMachine().GetState())
		}
	}
	if s := e.steps(t, id); len(s) != 2 || s[1] != StateDeleting {
		t.Fatalf("steps %v: want requested, deleting (once)", s)
	}
	l, err := e.client.ListMachines(ctx, &provisionmodulev1.ListMachinesRequest{PageSize: 2})
	if err != nil || len(l.GetMachines()) != 2 || l.GetNextPageToken() == "" {
		t.Fatalf("first page %v, %v", l, err)
	}
	l, err = e.client.ListMachines(ctx, &provisionmodulev1.ListMachinesRequest{PageSize: 2, PageToken: l.GetNextPageToken()})
	if err != nil || len(l.GetMachines()) != 1 || l.GetNextPageToken() != "" {
		t.Fatalf("second page %v, %v", l, err)
	}
}
