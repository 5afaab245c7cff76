package host

// ProbeWaiters is how many callers wait for the nvidia-smi run in flight besides the one that
// started it; -1 when none is in flight.
func (i *Inventory) ProbeWaiters() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.probe == nil {
		return -1
	}
	return i.probe.waiters
}
