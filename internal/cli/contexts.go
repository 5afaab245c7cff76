package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// contextsFile is the file, in the configuration directory, that holds the contexts.
const contextsFile = "contexts.yaml"

// Context is a named API and the credential to call it with, saved by `better-compute login`:
// an API key, or the session token of a sign-in through an identity provider (login --sso).
type Context struct {
	Name   string `yaml:"name"`
	API    string `yaml:"api"`
	APIKey string `yaml:"apiKey,omitempty"`
	// SessionToken is a session's bearer token ("bcs_…"), sent as an API key is; auth/signOut
	// ends it at logout.
	SessionToken string `yaml:"sessionToken,omitempty"`
	// SessionExpires is when the session ends at the latest (its idle timeout may end it sooner).
	SessionExpires *time.Time `yaml:"sessionExpires,omitempty"`
}

// credential is the bearer the context calls the API with: its session token, else its API key.
func (c Context) credential() string {
	if c.SessionToken != "" {
		return c.SessionToken
	}
	return c.APIKey
}

// sessionEnded reports whether the context holds a session that has ended by now.
func (c Context) sessionEnded(now time.Time) bool {
	return c.SessionToken != "" && c.SessionExpires != nil && !now.Before(*c.SessionExpires)
}

// Contexts is the contexts file: every saved context and the one used without --context.
type Contexts struct {
	Current  string    `yaml:"current,omitempty"`
	Contexts []Context `yaml:"contexts"`
}

// Find returns the context named name.
func (c *Contexts) Find(name string) (Context, bool) {
	i := slices.IndexFunc(c.Contexts, func(x Context) bool { return x.Name == name })
	if i < 0 {
		return Context{}, false
	}
	return c.Contexts[i], true
}

// Put adds ctx or replaces the context of its name.
func (c *Contexts) Put(ctx Context) {
	if i := slices.IndexFunc(c.Contexts, func(x Context) bool { return x.Name == ctx.Name }); i >= 0 {
		c.Contexts[i] = ctx
		return
	}
	c.Contexts = append(c.Contexts, ctx)
}

// Remove deletes the context named name (and unsets it as current); false when there is none.
func (c *Contexts) Remove(name string) bool {
	n := len(c.Contexts)
	c.Contexts = slices.DeleteFunc(c.Contexts, func(x Context) bool { return x.Name == name })
	if c.Current == name {
		c.Current = ""
	}
	return len(c.Contexts) < n
}

// describeCredential says, for context list, what the context calls the API with.
func (c Context) describeCredential(now time.Time) string {
	switch {
	case c.SessionToken == "":
		return "api key"
	case c.SessionExpires == nil:
		return "session"
	case c.sessionEnded(now):
		return "session ended " + c.SessionExpires.Local().Format(time.RFC3339)
	}
	return "session until " + c.SessionExpires.Local().Format(time.RFC3339)
}

// LoadContexts reads dir's contexts file; a missing file is no contexts.
func LoadContexts(dir string) (*Contexts, error) {
	path := filepath.Join(dir, contextsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Contexts{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("contexts: %w", err)
	}
	var c Contexts
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("contexts: %s: %w", path, err)
	}
	return &c, nil
}

// SaveContexts writes c to dir's contexts file atomically (a temporary file renamed over it),
// the directory 0700 and the file 0600: it holds API keys and session tokens.
func SaveContexts(dir string, c *Contexts) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	tmp, err := os.CreateTemp(dir, contextsFile+".*")
	if err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("contexts: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("contexts: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("contexts: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, contextsFile)); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	return nil
}
