package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Line is a supported server product line. Each line has one Dialect that
// owns every statement sent to servers of that line.
type Line string

const (
	// MySQL57 is MySQL 5.7: SHOW SLAVE STATUS, CHANGE MASTER TO …
	// MASTER_AUTO_POSITION=1, super_read_only, semisync_master/slave plugins.
	MySQL57 Line = "mysql-5.7"
	// MySQL80 is MySQL 8.0. Its statements changed within the series (SHOW
	// REPLICA STATUS in 8.0.22, CHANGE REPLICATION SOURCE in 8.0.23, the
	// semisync_source/replica plugins in 8.0.26), so its dialect checks the
	// patch version.
	MySQL80 Line = "mysql-8.0"
	// MySQL84 is MySQL 8.4 LTS; the 8.1–8.3 innovation releases and 9.x use
	// the same statements (CHANGE MASTER and SHOW SLAVE STATUS are gone) and
	// are treated as this line.
	MySQL84 Line = "mysql-8.4"
	// MariaDB is MariaDB 10.11 or later: domain-server-seq GTIDs,
	// CHANGE MASTER TO … MASTER_USE_GTID=slave_pos, no super_read_only,
	// built-in semi-sync.
	MariaDB Line = "mariadb"
)

// Version is a server's numeric version.
type Version struct {
	// Major, Minor and Patch are the leading numbers of @@version.
	Major, Minor, Patch int
}

// String returns "major.minor.patch".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports v >= major.minor.patch.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// Flavor is what a server says it is. It is detected from SELECT @@version,
// @@version_comment and never from an image name: an image tag can lie, the
// running server cannot.
type Flavor struct {
	// Line selects the dialect.
	Line Line
	// Version is the numeric version.
	Version Version
	// VersionString is @@version as the server reported it.
	VersionString string
	// Comment is @@version_comment as the server reported it.
	Comment string
}

// String returns a human name such as "MySQL 8.0.36" or "MariaDB 10.11.6".
func (f Flavor) String() string {
	if f.Line == "" {
		return "unknown"
	}
	if f.IsMariaDB() {
		return "MariaDB " + f.Version.String()
	}
	return "MySQL " + f.Version.String()
}

// IsMariaDB reports whether the server is MariaDB, whose GTIDs are positions
// (gtid.MariaDBPos) instead of sets (gtid.MySQLSet).
func (f Flavor) IsMariaDB() bool { return f.Line == MariaDB }

// IsMySQL reports whether the server is MySQL (or a MySQL derivative such as
// Percona Server).
func (f Flavor) IsMySQL() bool { return f.Line == MySQL57 || f.Line == MySQL80 || f.Line == MySQL84 }

// ErrUnsupportedFlavor is wrapped by DetectFlavor when the server is of a
// product or version this tool does not manage.
var ErrUnsupportedFlavor = errors.New("unsupported server flavor")

// DetectFlavor classifies a server from @@version and @@version_comment.
//
// MariaDB says so in @@version ("10.11.6-MariaDB-log"), or, through the
// replication handshake, with a "5.5.5-" prefix that is not its version;
// MySQL and its derivatives (Percona Server) print a plain version, with the
// product in @@version_comment.
func DetectFlavor(version, comment string) (Flavor, error) {
	f := Flavor{VersionString: version, Comment: comment}
	v := strings.TrimSpace(version)
	isMariaDB := strings.Contains(strings.ToLower(v), "mariadb") || strings.Contains(strings.ToLower(comment), "mariadb")
	if isMariaDB {
		v = strings.TrimPrefix(v, "5.5.5-")
	}
	parsed, err := parseVersion(v)
	if err != nil {
		return f, fmt.Errorf("%w: cannot read version %q: %w", ErrUnsupportedFlavor, version, err)
	}
	f.Version = parsed
	switch {
	case isMariaDB:
		if !parsed.AtLeast(10, 11, 0) {
			return f, fmt.Errorf("%w: MariaDB %s (10.11 or later is required: READ_ONLY ADMIN and the semi-sync and GTID behaviour this tool relies on arrived there)", ErrUnsupportedFlavor, parsed)
		}
		f.Line = MariaDB
	case parsed.Major == 5 && parsed.Minor == 7:
		f.Line = MySQL57
	case parsed.Major == 8 && parsed.Minor == 0:
		f.Line = MySQL80
	case parsed.Major == 8 || parsed.Major == 9:
		f.Line = MySQL84
	default:
		return f, fmt.Errorf("%w: MySQL %s (5.7, 8.0 and 8.4 are supported)", ErrUnsupportedFlavor, parsed)
	}
	return f, nil
}

// parseVersion reads the leading "major.minor.patch" of a version string.
func parseVersion(s string) (Version, error) {
	end := 0
	for end < len(s) && (s[end] == '.' || (s[end] >= '0' && s[end] <= '9')) {
		end++
	}
	parts := strings.Split(strings.TrimSuffix(s[:end], "."), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, errors.New("expected major.minor[.patch]")
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, errors.New("expected major.minor[.patch]")
		}
		nums[i] = n
	}
	return Version{nums[0], nums[1], nums[2]}, nil
}
