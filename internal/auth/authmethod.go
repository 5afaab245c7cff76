package auth

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
)

// The database stores an auth method's binding rules as a JSON list of auth.v1.BindingRule in
// protojson, and its claim paths as an auth.v1.ClaimPaths in protojson ({"groups", "email",
// "name"}). These encode and decode them, for the API that writes them and the sign-in that
// reads them.

// EncodeRules encodes rules for auth_methods.rules.
func EncodeRules(rules []*authv1.BindingRule) ([]byte, error) {
	list := make([]json.RawMessage, len(rules))
	for i, r := range rules {
		b, err := protojson.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode binding rule %d: %w", i, err)
		}
		list[i] = b
	}
	return json.Marshal(list)
}

// DecodeRules decodes auth_methods.rules.
func DecodeRules(b []byte) ([]*authv1.BindingRule, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("decode binding rules: %w", err)
	}
	rules := make([]*authv1.BindingRule, len(list))
	for i, raw := range list {
		rules[i] = &authv1.BindingRule{}
		if err := protojson.Unmarshal(raw, rules[i]); err != nil {
			return nil, fmt.Errorf("decode binding rule %d: %w", i, err)
		}
	}
	return rules, nil
}

// EncodeClaimPaths encodes claim paths for auth_methods.claim_paths.
func EncodeClaimPaths(p *authv1.ClaimPaths) ([]byte, error) {
	if p == nil {
		p = &authv1.ClaimPaths{}
	}
	b, err := protojson.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode claim paths: %w", err)
	}
	return b, nil
}

// DecodeClaimPaths decodes auth_methods.claim_paths.
func DecodeClaimPaths(b []byte) (*authv1.ClaimPaths, error) {
	p := &authv1.ClaimPaths{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("decode claim paths: %w", err)
	}
	return p, nil
}
