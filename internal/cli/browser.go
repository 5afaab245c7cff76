package cli

import (
	"os/exec"
	"runtime"
)

// openBrowser opens url with the Options' opener, else the desktop's (open on macOS, xdg-open
// elsewhere) when there is one; the URL is printed too, so having none is not an error.
func (o *Options) openBrowser(url string) {
	if o.OpenBrowser != nil {
		_ = o.OpenBrowser(url)
		return
	}
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return
	}
	cmd := exec.Command(path, url) //nolint:gosec // the API's sign-in URL, opened as the user asked
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}
