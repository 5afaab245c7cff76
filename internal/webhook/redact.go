package webhook

import "net/url"

// RedactedPath replaces the path, query and fragment of a redacted webhook URL.
const RedactedPath = "/[redacted]"

// RedactURL returns a webhook URL with only its scheme and host: the path and query often carry
// a token, so events, logs and callers that may only read webhooks get this form. A URL with
// nothing after its host is returned as scheme://host; one that does not parse as
// "[redacted]".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "[redacted]"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.User != nil {
		out += RedactedPath
	}
	return out
}
