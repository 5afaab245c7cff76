package usage

// RowsRead returns how many export rows s has read from the database.
func (s *Service) RowsRead() int64 { return s.rowsRead.Load() }
