//go:build unix

package cli

import (
	"io"
	"os"
	"syscall"
)

// pollableInput returns a duplicate of in, when in is a pipe or a socket (ssh's ProxyCommand
// gives a pipe), that the runtime's network poller reads: a Read waits in the poller, not in a
// blocked system call on a thread of its own, and Close returns it at once. The duplicate shares
// in's open file description, so in is non-blocking until restore, which closes the duplicate
// and makes in blocking again. ok is false for anything else (a terminal, a regular file, an
// io.Reader that is not a file), which the caller reads from a goroutine of its own.
func pollableInput(in io.Reader) (f *os.File, restore func(), ok bool) {
	file, isFile := in.(*os.File)
	if !isFile {
		return nil, nil, false
	}
	raw, err := file.SyscallConn() // not file.Fd(), which would make a pollable file blocking
	if err != nil {
		return nil, nil, false
	}
	dup := -1
	if err := raw.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) != nil {
			return
		}
		if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
			return
		}
		syscall.ForkLock.RLock() // as os/exec does: no fork between the dup and CloseOnExec
		d, err := syscall.Dup(int(fd))
		if err == nil {
			syscall.CloseOnExec(d)
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			return
		}
		if syscall.SetNonblock(d, true) != nil {
			_ = syscall.Close(d)
			return
		}
		dup = d
	}); err != nil || dup < 0 {
		return nil, nil, false
	}
	f = os.NewFile(uintptr(dup), file.Name()) // non-blocking: the poller's
	return f, func() {
		_ = f.Close()
		_ = raw.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}, true
}
