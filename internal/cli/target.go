package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
)

// Environment variables that choose the API, over the context and under the flags.
const (
	EnvURL    = "BETTER_COMPUTE_URL"
	EnvAPIKey = "BETTER_COMPUTE_API_KEY"
)

// Target is the API a command calls and the key it calls with.
type Target struct {
	URL, APIKey string
}

// Resolver finds the Target of every command that calls the API, the one way: the flags --api
// and --api-key, then BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY, then the context named by
// --context or else the current one.
type Resolver struct {
	// ConfigDir holds contexts.yaml; empty means os.UserConfigDir()/better-compute.
	ConfigDir string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string

	api, apiKey, context string
}

// AddFlags adds --api, --api-key and --context to fs (a root's persistent flags).
func (r *Resolver) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.api, "api", "", "API URL with its base path, as dev prints it (\"API:\") (env "+EnvURL+"; default the context's)")
	fs.StringVar(&r.apiKey, "api-key", "", "API key (env "+EnvAPIKey+"; default the context's)")
	fs.StringVar(&r.context, "context", "", "saved context to use (default the current one; see better-compute context list)")
}

// Dir is the configuration directory of the contexts file.
func (r *Resolver) Dir() (string, error) {
	if r.ConfigDir != "" {
		return r.ConfigDir, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("contexts: %w", err)
	}
	return filepath.Join(dir, "better-compute"), nil
}

// contexts reads the saved contexts and says where they live.
func (r *Resolver) contexts() (string, *Contexts, error) {
	dir, err := r.Dir()
	if err != nil {
		return "", nil, err
	}
	cs, err := LoadContexts(dir)
	return dir, cs, err
}

func (r *Resolver) getenv(name string) string {
	if r.Getenv != nil {
		return r.Getenv(name)
	}
	return os.Getenv(name)
}

// Resolve returns the API to call; an error when no URL or key is found anywhere.
func (r *Resolver) Resolve() (Target, error) { return r.resolve(true) }

// resolve is Resolve, without requiring a key when requireKey is false (public methods).
func (r *Resolver) resolve(requireKey bool) (Target, error) {
	var t Target
	if r.context != "" || r.api == "" || r.apiKey == "" {
		ctx, err := r.selected()
		if err != nil {
			return Target{}, err
		}
		t = Target{URL: ctx.API, APIKey: ctx.credential()}
		if ctx.sessionEnded(time.Now()) {
			// An ended session is no credential: public methods go without it, the others need
			// a key from the environment or the flags, else a new sign-in.
			t.APIKey = ""
			if requireKey && r.apiKey == "" && r.getenv(EnvAPIKey) == "" {
				return Target{}, &ExitError{Code: ExitAuth, Err: fmt.Errorf("the session of context %q ended at %s: sign in again with `better-compute login --sso`",
					ctx.Name, ctx.SessionExpires.Local().Format(time.RFC3339))}
			}
		}
	}
	for _, v := range []struct {
		dst        *string
		flag, name string
	}{{&t.URL, r.api, EnvURL}, {&t.APIKey, r.apiKey, EnvAPIKey}} {
		if e := r.getenv(v.name); e != "" {
			*v.dst = e
		}
		if v.flag != "" {
			*v.dst = v.flag
		}
	}
	if t.URL == "" || (requireKey && t.APIKey == "") {
		return Target{}, usageError(errors.New("the API is needed: run `better-compute login`, or set --api and --api-key (or " + EnvURL + " and " + EnvAPIKey + ")"))
	}
	return t, nil
}

// selected is the context --context names (an error when there is none of that name), else the
// current one, else an empty one.
func (r *Resolver) selected() (Context, error) {
	dir, err := r.Dir()
	if err != nil {
		if r.context == "" {
			return Context{}, nil
		}
		return Context{}, err
	}
	cs, err := LoadContexts(dir)
	if err != nil {
		return Context{}, err
	}
	name := r.context
	if name == "" {
		name = cs.Current
	}
	ctx, ok := cs.Find(name)
	if !ok && r.context != "" {
		return Context{}, usageError(fmt.Errorf("--context: no context %q (see `better-compute context list`)", r.context))
	}
	return ctx, nil
}
