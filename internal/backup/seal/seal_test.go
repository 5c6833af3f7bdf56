package seal_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
)

func newKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSealOpen: what is sealed to two recipients opens with either one's identity file and with
// no other; a changed byte fails the read; keys that are not age keys are refused by name, and an
// identity file's text is never quoted in an error.
func TestSealOpen(t *testing.T) {
	a, b, other := newKey(t), newKey(t), newKey(t)
	to, err := seal.ParseRecipients([]string{a.Recipient().String(), " " + b.Recipient().String() + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	plain := bytes.Repeat([]byte("row 42, acknowledged\n"), 10000) // several 64 KiB chunks
	var sealed bytes.Buffer
	w, err := seal.Seal(&sealed, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed.Bytes(), []byte("acknowledged")) || !bytes.HasPrefix(sealed.Bytes(), []byte("age-encryption.org/v1")) {
		t.Fatalf("the sealed bytes hold the plain text, or are not age's format: %.60q", sealed.Bytes())
	}
	recipients := []string{a.Recipient().String(), b.Recipient().String()}
	for name, key := range map[string]*age.X25519Identity{"first": a, "second": b} {
		ids, err := seal.ParseIdentities("# created: today\n# public key: " + key.Recipient().String() + "\n" + key.String() + "\n")
		if err != nil || !ids.Opens(recipients) || ids.Public()[0] != key.Recipient().String() {
			t.Fatalf("%s identity: %v, opens %v", name, err, ids.Opens(recipients))
		}
		r, err := seal.Open(bytes.NewReader(sealed.Bytes()), ids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("opened with the %s identity: %d bytes, %v; want the plain text", name, len(got), err)
		}
	}
	// A file of several keys: only the one that opens the backup is kept.
	both, err := seal.ParseIdentities(other.String() + "\n" + b.String() + "\n")
	if err != nil {
		t.Fatal(err)
	}
	only, ok := both.Only(recipients)
	if kept, err := seal.ParseIdentities(only); !ok || err != nil || len(kept.Public()) != 1 || kept.Public()[0] != b.Recipient().String() || strings.Contains(only, other.String()) {
		t.Errorf("Only = %v (%v): want the second key alone", ok, err)
	}
	if _, ok := both.Only([]string{"age1none"}); ok {
		t.Error("Only found a key for a recipient none of them is")
	}
	wrong, err := seal.ParseIdentities(other.String())
	if err != nil {
		t.Fatal(err)
	}
	if wrong.Opens(recipients) {
		t.Error("another identity is said to open it")
	}
	if _, err := seal.Open(bytes.NewReader(sealed.Bytes()), wrong); !errors.Is(err, seal.ErrNoIdentity) {
		t.Errorf("opened with another identity: %v; want ErrNoIdentity", err)
	}
	changed := bytes.Clone(sealed.Bytes())
	changed[len(changed)-100] ^= 1
	ids, _ := seal.ParseIdentities(a.String())
	if r, err := seal.Open(bytes.NewReader(changed), ids); err == nil {
		if _, err := io.ReadAll(r); err == nil {
			t.Error("a changed byte was read without an error")
		}
	}

	if _, err := seal.ParseRecipients([]string{a.Recipient().String(), "ssh-ed25519 AAAA", "age1nope"}); err == nil ||
		!strings.Contains(err.Error(), `"ssh-ed25519 AAAA", "age1nope"`) {
		t.Errorf("bad public keys: %v; want both named", err)
	}
	if _, err := seal.ParseRecipients(nil); err == nil {
		t.Error("no public key was accepted")
	}
	secretText := "AGE-SECRET-KEY-1NOTAKEY" + strings.Repeat("Q", 40)
	if _, err := seal.ParseIdentities(secretText); err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("a bad identity file: %v; want a refusal that does not quote it", err)
	}
	// No recipients: the writer is the stream itself; no identities: the reader is.
	var raw bytes.Buffer
	w, _ = seal.Seal(&raw, nil)
	_, _ = w.Write([]byte("plain"))
	_ = w.Close()
	if r, err := seal.Open(&raw, seal.Identities{}); err != nil || raw.String() != "plain" || r == nil {
		t.Errorf("unsealed: %q, %v", raw.String(), err)
	}
}
