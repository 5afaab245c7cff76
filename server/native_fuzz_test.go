package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/gen/db"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/server/servertest"
)

// Fuzz modes: bits of the mode argument of FuzzNativeProcedures.
const (
	modeProtocol = 0b11      // 0 Connect, 1 gRPC (h2c), 2 gRPC-Web, 3 Connect again
	modeJSON     = 1 << 2    // JSON codec, else binary protobuf
	modeGzip     = 1 << 3    // the request compressed with gzip
	modeCaller   = 0b11 << 4 // 0 root owner, 1 another tenant's owner, 2 no credential, 3 the fuzzed Authorization
)

// secretMark is in every name of the root tenant's rows: no other caller may ever read it.
const secretMark = "rootonly7f3c"

// FuzzNativeProcedures calls every method on its native path, over Connect, gRPC and gRPC-Web,
// with protobuf or JSON bodies, gzip or not, arbitrary Authorization and Idempotency-Key headers,
// as the root tenant's owner, another tenant's owner, or nobody. Whatever the input: no 5xx and
// no Internal, Unknown, DataLoss or Unimplemented code, no panic; and a caller other than the
// root owner never reads the root tenant's rows (their ids, unless it sent them, and names) nor
// changes them. The seeds run under plain `go test`; `go test -fuzz FuzzNativeProcedures
// ./server` explores.
func FuzzNativeProcedures(f *testing.F) {
	env := servertest.New(f)
	methods := mustRegistry(f).Methods()
	root := plantRootRows(f, env)
	other, err := env.IAM(env.AdminKey).CreateTenant(context.Background(), &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		f.Fatal(err)
	}
	otherKey := other.GetOwnerApiKey()
	snapshot := tenantSnapshot(f, env.Pool)

	bodies := []string{`{}`, `{"id":"%s"}`, `{"nodeId":"%s","type":"echo"}`, `{"principalId":"%s","role":"ROLE_OWNER"}`,
		`{"name":"n","labels":{"a":"b"}}`, `{"pageSize":1000,"pageToken":"%s"}`, `{"tenantId":"%s"}`, "\x0a\x03abc"}
	// A NUL in every common text field, for every method: PostgreSQL cannot store it.
	nul := `{"type":"a\u0000","subject":"\u0000","description":"\u0000","name":"\u0000","method":"\u0000","labels":{"\u0000":"\u0001"}}`
	for i := range methods {
		for j, b := range bodies {
			if (i+j)%4 != 0 {
				continue // a spread of pairs keeps the seed run short
			}
			id := root.ids[(i+j)%len(root.ids)]
			body := strings.ReplaceAll(b, "%s", id)
			mode := uint8(i+j) & (modeProtocol | modeJSON | modeGzip)
			f.Add(uint16(i), []byte(body), mode|1<<4, "", "")                             // another tenant
			f.Add(uint16(i), []byte(body), mode|(uint8(i)%4)<<4, "Bearer bck_x", "k-"+id) // any caller
		}
	}
	for i, m := range methods {
		body := []byte(nul)
		if uint8(i)&modeJSON != 0 {
			body = ownFields(f, m.Descriptor.Input(), nul) // JSON callers are held to the schema
		}
		f.Add(uint16(i), body, uint8(i)&(modeProtocol|modeJSON), "", "")
	}
	f.Add(uint16(0), []byte(`{}`), uint8(3<<4), "Bearer "+strings.Repeat("A", 5000), "")
	f.Add(uint16(1), []byte(`{}`), uint8(3<<4|modeJSON), "Basic Zm9vOmJhcg==", strings.Repeat("k", 256))

	clients := map[int]*http.Client{0: env.Server.Client(), 1: h2cClient(), 2: env.Server.Client(), 3: env.Server.Client()}
	f.Fuzz(func(t *testing.T, method uint16, body []byte, mode uint8, authorization, idempotencyKey string) {
		m := methods[int(method)%len(methods)]
		caller := int(mode&modeCaller) >> 4
		switch caller {
		case 0:
			authorization = "Bearer " + env.AdminKey
		case 1:
			authorization = "Bearer " + otherKey
		case 2:
			authorization = ""
		}
		if !validHeader(authorization) || !validHeader(idempotencyKey) {
			t.Skip()
		}
		payload := body
		if mode&modeJSON == 0 {
			// Seeds are JSON; send them as the protobuf they describe, and anything else raw.
			msg := dynamicpb.NewMessage(m.Descriptor.Input())
			if protojson.Unmarshal(body, msg) == nil {
				if b, err := proto.Marshal(msg); err == nil {
					payload = b
				}
			}
		}
		var before string
		if caller != 0 {
			before = snapshot(t)
		}
		protocol := int(mode & modeProtocol)
		answer, bad := callNative(t, clients[protocol], env.URL, m, protocol, mode&modeJSON != 0, mode&modeGzip != 0, payload, authorization, idempotencyKey)
		if bad != "" {
			t.Fatalf("%s %s (mode %08b, body %q): %s", m.Procedure, protocolName(protocol), mode, body, bad)
		}
		if caller == 0 {
			return
		}
		if bytes.Contains(answer, []byte(secretMark)) {
			t.Fatalf("%s as %s answered the root tenant's names: %q", m.Procedure, callerName(caller), answer)
		}
		for _, id := range root.hidden {
			if bytes.Contains(answer, []byte(id)) && !bytes.Contains(payload, []byte(id)) && !bytes.Contains(body, []byte(id)) {
				t.Fatalf("%s as %s answered the root tenant's id %s: %q", m.Procedure, callerName(caller), id, answer)
			}
		}
		if after := snapshot(t); after != before {
			t.Fatalf("%s as %s (body %q) changed the root tenant's rows", m.Procedure, callerName(caller), body)
		}
	})
}

// rootRows are rows of the root tenant planted for the cross-tenant checks: ids to probe with,
// and the ids among them no other tenant may read (a child tenant knows its parent's id).
type rootRows struct{ ids, hidden []string }

func plantRootRows(t testing.TB, env *servertest.Env) rootRows {
	t.Helper()
	ctx := context.Background()
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tenant := uuid.MustParse(me.GetTenant().GetId())
	q := db.New(env.Pool)
	n, err := q.CreateNode(ctx, db.CreateNodeParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Hostname: "host-" + secretMark, Labels: []byte(`{"a":"b"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.IAM(env.AdminKey).CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "sa-" + secretMark})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jointokensv1connect.NewJoinTokensServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx, &jointokensv1.CreateRequest{Description: "token " + secretMark, MaxUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	hidden := []string{n.ID.String(), p.GetPrincipal().GetId(), tok.GetJoinToken().GetId(), me.GetPrincipal().GetId()}
	return rootRows{ids: append([]string{tenant.String()}, hidden...), hidden: hidden}
}

// tenantSnapshot returns a function that digests every row of the root tenant (of each table
// with a tenant_id column, and its tenants row), so that a change by another caller shows.
func tenantSnapshot(t testing.TB, pool *pgxpool.Pool) func(testing.TB) string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = 'public' AND column_name = 'tenant_id' AND table_name NOT IN ('audit_events', 'outbox') ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("SELECT '%s' || (SELECT COALESCE(string_agg(r::text, ',' ORDER BY r::text), '') FROM %q r WHERE tenant_id = (SELECT id FROM tenants WHERE parent_id IS NULL))", table, table))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	query := "SELECT md5(string_agg(x, ';')) FROM (" + strings.Join(parts, " UNION ALL ") + " UNION ALL SELECT t::text FROM tenants t WHERE parent_id IS NULL) s(x)"
	return func(t testing.TB) string {
		t.Helper()
		var digest string
		if err := pool.QueryRow(ctx, query).Scan(&digest); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		return digest
	}
}

// callNative makes one call on m's native path and returns the answer's bytes and, when the
// answer breaks the invariants, why.
func callNative(t *testing.T, c *http.Client, base string, m *registry.Method, protocol int, asJSON, gz bool, payload []byte, authorization, idempotencyKey string) (answer []byte, bad string) {
	t.Helper()
	codec := "proto"
	if asJSON {
		codec = "json"
	}
	body := payload
	if gz {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(payload)
		_ = w.Close()
		body = buf.Bytes()
	}
	h := http.Header{}
	switch protocol {
	case 1, 2:
		kind := "application/grpc"
		if protocol == 2 {
			kind = "application/grpc-web"
		}
		h.Set("Content-Type", kind+"+"+codec)
		flag := byte(0)
		if gz {
			flag = 1
			h.Set("Grpc-Encoding", "gzip")
		}
		framed := make([]byte, 5, 5+len(body))
		framed[0] = flag
		binary.BigEndian.PutUint32(framed[1:], uint32(len(body)))
		body = append(framed, body...)
		if protocol == 1 {
			h.Set("Te", "trailers")
		}
	default:
		h.Set("Content-Type", "application/"+codec)
		h.Set("Connect-Protocol-Version", "1")
		if gz {
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("X-Better-Compute", "1")
	if authorization != "" {
		h.Set("Authorization", authorization)
	}
	if idempotencyKey != "" {
		h.Set("Idempotency-Key", idempotencyKey)
	}
	req, err := http.NewRequest(http.MethodPost, base+m.Procedure, bytes.NewReader(body))
	if err != nil {
		t.Skip()
	}
	req.Header = h
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", m.Procedure, err)
	}
	defer res.Body.Close()
	answer, err = io.ReadAll(res.Body)
	if err != nil {
		return answer, fmt.Sprintf("reading the answer: %v", err)
	}
	if res.StatusCode >= 500 {
		return answer, fmt.Sprintf("HTTP %d %q", res.StatusCode, answer)
	}
	var code string
	switch protocol {
	case 1:
		code = res.Trailer.Get("Grpc-Status") + res.Header.Get("Grpc-Status")
	case 2:
		code = res.Header.Get("Grpc-Status")
		if i := bytes.Index(answer, []byte("grpc-status:")); i >= 0 {
			code = strings.TrimSpace(strings.SplitN(string(answer[i+len("grpc-status:"):]), "\r\n", 2)[0])
		}
	default:
		if res.StatusCode != http.StatusOK {
			var e struct{ Code string }
			_ = json.Unmarshal(answer, &e)
			code = e.Code
		}
	}
	switch code {
	case "2", "12", "13", "15", "unknown", "unimplemented", "internal", "data_loss":
		return answer, fmt.Sprintf("code %s, HTTP %d %q", code, res.StatusCode, answer)
	}
	return answer, ""
}

// validHeader reports whether v can be sent as a header value at all.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return len(v) < 16<<10
}

func protocolName(p int) string { return [...]string{"connect", "grpc", "grpc-web", "connect"}[p] }

func callerName(c int) string {
	return [...]string{"the root owner", "another tenant's owner", "nobody", "a fuzzed credential"}[c]
}
