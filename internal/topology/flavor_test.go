package topology

import (
	"errors"
	"testing"
)

func TestDetectFlavor(t *testing.T) {
	tests := []struct {
		version, comment string
		line             Line
		want             Version
		name             string
	}{
		{"5.7.44-log", "MySQL Community Server (GPL)", MySQL57, Version{5, 7, 44}, "MySQL 5.7.44"},
		{"8.0.36", "MySQL Community Server - GPL", MySQL80, Version{8, 0, 36}, "MySQL 8.0.36"},
		{"8.0.21", "MySQL Community Server - GPL", MySQL80, Version{8, 0, 21}, "MySQL 8.0.21"},
		{"8.4.3", "MySQL Community Server - GPL", MySQL84, Version{8, 4, 3}, "MySQL 8.4.3"},
		{"8.3.0", "MySQL Community Server - GPL", MySQL84, Version{8, 3, 0}, "MySQL 8.3.0"},
		{"9.1.0", "MySQL Community Server - GPL", MySQL84, Version{9, 1, 0}, "MySQL 9.1.0"},
		{"8.0.36-28", "Percona Server (GPL), Release 28, Revision 47601f19", MySQL80, Version{8, 0, 36}, "MySQL 8.0.36"},
		{"10.11.19-MariaDB-0+deb12u1-log", "Debian 12", MariaDB, Version{10, 11, 19}, "MariaDB 10.11.19"},
		{"5.5.5-10.11.6-MariaDB", "mariadb.org binary distribution", MariaDB, Version{10, 11, 6}, "MariaDB 10.11.6"},
		{"11.4.2-MariaDB-ubu2404", "mariadb.org binary distribution", MariaDB, Version{11, 4, 2}, "MariaDB 11.4.2"},
		{"10.11.6", "MariaDB Server", MariaDB, Version{10, 11, 6}, "MariaDB 10.11.6"},
	}
	for _, tt := range tests {
		f, err := DetectFlavor(tt.version, tt.comment)
		if err != nil {
			t.Errorf("DetectFlavor(%q, %q): %v", tt.version, tt.comment, err)
			continue
		}
		if f.Line != tt.line || f.Version != tt.want || f.String() != tt.name {
			t.Errorf("DetectFlavor(%q, %q) = %v %v %q", tt.version, tt.comment, f.Line, f.Version, f)
		}
		if f.VersionString != tt.version || f.Comment != tt.comment {
			t.Errorf("raw values not kept: %+v", f)
		}
		if f.IsMariaDB() == f.IsMySQL() {
			t.Errorf("%v is both or neither MySQL and MariaDB", f)
		}
	}
}

func TestDetectFlavorRefuses(t *testing.T) {
	for _, tt := range []struct{ version, comment string }{
		{"5.6.51-log", "MySQL Community Server (GPL)"},
		{"10.6.16-MariaDB", "mariadb.org binary distribution"},
		{"10.5.23-MariaDB", ""},
		{"", ""},
		{"banana", "MySQL"},
		{"7.0", "MySQL"},
	} {
		_, err := DetectFlavor(tt.version, tt.comment)
		if !errors.Is(err, ErrUnsupportedFlavor) {
			t.Errorf("DetectFlavor(%q, %q) = %v, want ErrUnsupportedFlavor", tt.version, tt.comment, err)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	v := Version{8, 0, 22}
	for _, tt := range []struct {
		a, b, c int
		want    bool
	}{{8, 0, 22, true}, {8, 0, 23, false}, {8, 0, 4, true}, {5, 7, 99, true}, {8, 4, 0, false}, {9, 0, 0, false}} {
		if got := v.AtLeast(tt.a, tt.b, tt.c); got != tt.want {
			t.Errorf("%v.AtLeast(%d,%d,%d) = %v", v, tt.a, tt.b, tt.c, got)
		}
	}
}
