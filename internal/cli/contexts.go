package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
)

// contextsFile is the file, in the configuration directory, that holds the contexts.
const contextsFile = "contexts.yaml"

// Context is a named API and the key to call it with, saved by `better-compute login`.
type Context struct {
	Name   string `yaml:"name"`
	API    string `yaml:"api"`
	APIKey string `yaml:"apiKey"`
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
// the directory 0700 and the file 0600: it holds API keys.
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
