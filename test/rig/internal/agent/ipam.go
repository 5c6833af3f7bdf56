package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// subnetLockDir holds one lock file per claimed 127.0.X.0/24. A rig holds an exclusive flock on its
// file for its whole life; the kernel releases it when the process dies, so a crashed rig never
// keeps its subnet.
var subnetLockDir = filepath.Join(os.TempDir(), "mysqlctl-rig-subnets")

// subnet is a claimed 127.0.X.0/24: .1 is the node's address (the source of probes), pods get
// .2–.254, handed out round-robin so a recreated pod gets a new address as it would in a cluster.
type subnet struct {
	x    int
	lock *os.File

	mu    sync.Mutex
	used  map[int]bool
	nextY int
}

// claimSubnet claims the first free 127.0.X.0/24 (X ≥ 1; 127.0.0.0/24 is left to the host) for
// rigID. It returns the ID of the previous holder if that one died without releasing the subnet
// cleanly, so that its iptables chain and cgroups can be removed.
func claimSubnet(rigID string) (*subnet, string, error) {
	if err := os.MkdirAll(subnetLockDir, 0o755); err != nil {
		return nil, "", err
	}
	for x := 1; x <= 254; x++ {
		f, err := os.OpenFile(filepath.Join(subnetLockDir, fmt.Sprintf("127.0.%d.lock", x)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, "", err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, "", fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		prev, _ := io.ReadAll(f)
		var prevPID int
		var prevID string
		_, _ = fmt.Sscanf(string(prev), "%d %s", &prevPID, &prevID)
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), rigID)), 0)
		return &subnet{x: x, lock: f, used: map[int]bool{}, nextY: 2}, prevID, nil
	}
	return nil, "", errors.New("no free 127.0.X.0/24 for the rig: 254 rigs are running")
}

// nodeIP is the node's own address.
func (s *subnet) nodeIP() string { return fmt.Sprintf("127.0.%d.1", s.x) }

// allocate returns an unused pod address.
func (s *subnet) allocate() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 253 {
		y := s.nextY
		s.nextY++
		if s.nextY > 254 {
			s.nextY = 2
		}
		if !s.used[y] {
			s.used[y] = true
			return fmt.Sprintf("127.0.%d.%d", s.x, y), nil
		}
	}
	return "", fmt.Errorf("no free pod address in 127.0.%d.0/24", s.x)
}

// release returns a pod address to the pool.
func (s *subnet) release(ip string) {
	var x, y int
	if _, err := fmt.Sscanf(ip, "127.0.%d.%d", &x, &y); err != nil || x != s.x {
		return
	}
	s.mu.Lock()
	delete(s.used, y)
	s.mu.Unlock()
}

// close releases the claim, recording that it was released cleanly.
func (s *subnet) close() {
	if s.lock != nil {
		_ = s.lock.Truncate(0)
		_ = s.lock.Close()
		s.lock = nil
	}
}
