package sso

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Claims are a verified token's (or a userinfo answer's) claims, as decoded from JSON with
// numbers kept as json.Number.
type Claims map[string]any

// decodeClaims decodes a JSON object of claims.
func decodeClaims(payload []byte) (Claims, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var c Claims
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrMalformed, err)
	}
	if c == nil {
		return nil, fmt.Errorf("%w: claims are not an object", ErrMalformed)
	}
	return c, nil
}

// Lookup returns the claim at a dot-separated path ("realm_access.roles"). A claim whose name
// itself holds dots (such as "https://example.com/groups") is found too: at each level the whole
// rest of the path is tried as a name before it is split.
func (c Claims) Lookup(path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	return lookup(c, path)
}

func lookup(m map[string]any, path string) (any, bool) {
	if v, ok := m[path]; ok {
		return v, true
	}
	for i := 0; i < len(path); i++ {
		if path[i] != '.' {
			continue
		}
		sub, ok := m[path[:i]].(map[string]any)
		if !ok {
			continue
		}
		if v, ok := lookup(sub, path[i+1:]); ok {
			return v, true
		}
	}
	return nil, false
}

// Strings returns the claim at path as strings: a string claim as one, a list claim as its
// strings; numbers and booleans (alone or in a list) count in their JSON spelling, and other
// values are skipped. It returns nil when there is no such claim.
func (c Claims) Strings(path string) []string {
	v, ok := c.Lookup(path)
	if !ok {
		return nil
	}
	if list, ok := v.([]any); ok {
		out := make([]string, 0, len(list))
		for _, item := range list {
			if s, ok := scalarString(item); ok {
				out = append(out, s)
			}
		}
		return out
	}
	if s, ok := scalarString(v); ok {
		return []string{s}
	}
	return nil
}

// String returns the claim at path when it is a string.
func (c Claims) String(path string) string {
	v, _ := c.Lookup(path)
	s, _ := v.(string)
	return s
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// Subject is the sub claim: with Issuer, who signed in.
func (c Claims) Subject() string { return c.String("sub") }

// Issuer is the iss claim.
func (c Claims) Issuer() string { return c.String("iss") }

// maxNumericDate bounds NumericDate claims (year 5138), well inside int64 nanoseconds' reach.
const maxNumericDate = 1e11

// Time returns the NumericDate claim name (seconds since the epoch, possibly fractional); ok is
// false when it is absent, and err is set when it is not a number.
func (c Claims) Time(name string) (t time.Time, ok bool, err error) {
	v, present := c[name]
	if !present {
		return time.Time{}, false, nil
	}
	var f float64
	switch v := v.(type) {
	case json.Number:
		f, err = v.Float64()
	case float64:
		f = v
	default:
		err = fmt.Errorf("not a number")
	}
	if err == nil && (math.IsNaN(f) || math.Abs(f) > maxNumericDate) {
		err = fmt.Errorf("out of range")
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: claim %s: %w", ErrMalformed, name, err)
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true, nil
}
