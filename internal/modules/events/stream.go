package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// streamConfig is the stream the module creates: every subject under the prefix, on disk,
// keeping messages for MaxAge and message ids for DuplicateWindow.
func (c *Config) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "Better Compute's events, published by its events module",
		Subjects:    []string{c.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		MaxAge:      c.MaxAge,
		Duplicates:  c.DuplicateWindow,
		Replicas:    c.Replicas,
	}
}

// ensureStream creates the stream, or checks the one there: one whose subjects are not the
// module's is an error that says how they differ; other settings that differ (an operator's
// choice, perhaps) are logged and left.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg *Config, log *slog.Logger) error {
	want := cfg.streamConfig()
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err = js.CreateStream(ctx, want); err == nil {
			log.Info("created the NATS stream", "stream", want.Name, "subjects", want.Subjects, "max_age", want.MaxAge,
				"duplicate_window", want.Duplicates, "replicas", want.Replicas)
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		st, err = js.Stream(ctx, want.Name) // created meanwhile, with other settings
	}
	if err != nil {
		return fmt.Errorf("read stream %s: %w", want.Name, err)
	}
	got := st.CachedInfo().Config
	if err := subjectsDiffer(got, want); err != nil {
		return err
	}
	if d := settingsDiffer(got, want); len(d) > 0 {
		log.Warn("the NATS stream's settings are not the module's; publishing to it as it is", "stream", want.Name, "differences", strings.Join(d, "; "))
	}
	return nil
}

// subjectsDiffer is an error when the stream does not hold exactly the module's subjects.
func subjectsDiffer(got, want jetstream.StreamConfig) error {
	a, b := slices.Sorted(slices.Values(got.Subjects)), slices.Sorted(slices.Values(want.Subjects))
	if slices.Equal(a, b) {
		return nil
	}
	return fmt.Errorf("stream %s has the subjects [%s], not [%s]: point the module at a stream of its own (stream), or give this one the subjects [%s]",
		want.Name, strings.Join(a, " "), strings.Join(b, " "), strings.Join(b, " "))
}

// settingsDiffer lists the settings, besides the subjects, in which the stream is not the one the
// module would create.
func settingsDiffer(got, want jetstream.StreamConfig) []string {
	var out []string
	if got.Storage != want.Storage {
		out = append(out, fmt.Sprintf("storage %s, not %s", got.Storage, want.Storage))
	}
	if got.MaxAge != want.MaxAge {
		out = append(out, fmt.Sprintf("maxAge %s, not %s", got.MaxAge, want.MaxAge))
	}
	if got.Duplicates != want.Duplicates {
		out = append(out, fmt.Sprintf("duplicate window %s, not %s", got.Duplicates, want.Duplicates))
	}
	if got.Replicas != want.Replicas {
		out = append(out, fmt.Sprintf("replicas %d, not %d", got.Replicas, want.Replicas))
	}
	return out
}
