package objectstore

// SetUploadPage makes listings of incomplete uploads return n per page.
func SetUploadPage(s *Store, n int32) { s.uploadPage = n }

// CompleteTimeout is completeTimeout.
var CompleteTimeout = completeTimeout
