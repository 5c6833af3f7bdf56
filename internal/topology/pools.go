package topology

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
)

// Pools keeps one connection pool per instance for a caller that looks at the same servers again
// and again (a supervisor checks every primary every second): a check then costs one round trip
// on a connection already logged in, not a TCP handshake and a MySQL authentication.
//
// A pool belongs to one incarnation of one target: the same name, address, pod UID and
// credentials. When any of them changes (the pod returned with a new IP, the password was
// rotated), the old pool is closed and a new one opened, so a connection never reaches a server
// it was not opened for. Pools unused for IdleClose are closed.
//
// Instances returned by Instance share the pool: their Close does nothing. Every session a
// pooled Instance prepares is restored before its connection goes back (see withSession), so a
// pooled connection never carries a role or disabled binary logging to its next user.
type Pools struct {
	// Options say how to dial; Credentials is ignored (each call names its own).
	Options ConnectOptions
	// IdleClose closes a pool not used for this long (default 2 minutes).
	IdleClose time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu     sync.Mutex
	byName map[string]*pooled
	closed bool
}

type pooled struct {
	identity string
	db       *sql.DB
	used     time.Time
}

// Instance returns an Instance on the pool of t's incarnation, opening it on first use.
// incarnation names what must match for a connection to be reused besides the address and the
// credentials (the pod UID).
func (p *Pools) Instance(t Target, incarnation string, creds Credentials) (*Instance, error) {
	name := t.Namespace + "/" + t.Pod + "/" + t.Name + "/" + creds.User
	id := identity(t, incarnation, creds)
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolsClosed
	}
	p.sweep(now)
	e, ok := p.byName[name]
	if ok && e.identity != id {
		_ = e.db.Close()
		delete(p.byName, name)
		ok = false
	}
	if !ok {
		opts := p.Options
		opts.Credentials = creds
		db, err := Open(t, opts)
		if err != nil {
			return nil, err
		}
		e = &pooled{identity: id, db: db}
		if p.byName == nil {
			p.byName = map[string]*pooled{}
		}
		p.byName[name] = e
	}
	e.used = now
	i := NewInstance(t.Name, e.db, creds.Password.Reveal())
	i.Server = t.server(creds.User)
	return i, nil
}

// Len is the number of open pools.
func (p *Pools) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byName)
}

// Close closes every pool; later calls to Instance fail.
func (p *Pools) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for name, e := range p.byName {
		_ = e.db.Close()
		delete(p.byName, name)
	}
	return nil
}

// sweep closes the pools unused for IdleClose; p.mu is held.
func (p *Pools) sweep(now time.Time) {
	idle := p.IdleClose
	if idle <= 0 {
		idle = 2 * time.Minute
	}
	for name, e := range p.byName {
		if now.Sub(e.used) > idle {
			_ = e.db.Close()
			delete(p.byName, name)
		}
	}
}

func (p *Pools) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// identity is what must match for a pool to be reused. The password enters as a hash, so that the
// map holds no second copy of it.
func identity(t Target, incarnation string, creds Credentials) string {
	h := sha256.Sum256([]byte(creds.Password.Reveal()))
	return incarnation + "|" + t.Host + "|" + strconv.Itoa(t.port()) + "|" + hex.EncodeToString(h[:])
}

type poolsError string

func (e poolsError) Error() string { return string(e) }

const errPoolsClosed = poolsError("connection pools closed")
