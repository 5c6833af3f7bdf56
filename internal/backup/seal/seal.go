// Package seal encrypts a backup's objects on the client side, to age public keys (X25519
// recipients, age1…): the cluster, `watch` and the backup Job hold only the public keys, and only a
// restore (and a verification) needs a private key (an identity, AGE-SECRET-KEY-1…). The bucket
// then holds nothing readable without one of the identities, and the SHA-256 a manifest records
// is of the encrypted bytes, so a damaged object is still found without a key.
//
// It is pure: it parses and compares keys, and wraps streams (age's format, in 64 KiB chunks each
// authenticated, so a changed byte is refused when it is read).
package seal

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// Method is the name a manifest records for this encryption.
const Method = "age"

// ErrNoIdentity means none of the identities given opens the object: the wrong private key.
var ErrNoIdentity = errors.New("none of the identities given is one of the backup's recipients")

// ParseRecipients parses age X25519 public keys (age1…), naming every one that is not.
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	var out []age.Recipient
	var bad []string
	for _, k := range keys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q", k))
			continue
		}
		out = append(out, r)
	}
	if len(bad) > 0 {
		return nil, outcome.Invalid("not an age public key (age1…, from age-keygen): " + strings.Join(bad, ", "))
	}
	if len(out) == 0 {
		return nil, outcome.Invalid("no age public key given")
	}
	return out, nil
}

// Identities are the private keys of an identity file (age-keygen's output: lines of
// AGE-SECRET-KEY-1…, comments and blank lines), with the public key of each.
type Identities struct {
	ids    []age.Identity
	public []string
}

// ParseIdentities reads an identity file's text. The error never quotes the text.
func ParseIdentities(text string) (Identities, error) {
	parsed, err := age.ParseIdentities(strings.NewReader(text))
	if err != nil {
		return Identities{}, outcome.Invalid("not an age identity file (lines of AGE-SECRET-KEY-1…, as age-keygen writes them)")
	}
	var is Identities
	for _, id := range parsed {
		x, ok := id.(*age.X25519Identity)
		if !ok {
			return Identities{}, outcome.Invalid("only age X25519 identities (AGE-SECRET-KEY-1…) are read")
		}
		is.ids = append(is.ids, x)
		is.public = append(is.public, x.Recipient().String())
	}
	return is, nil
}

// Opens says whether one of the identities is the private key of one of the recipients (the
// public keys a manifest records): only then can the object be read.
func (is Identities) Opens(recipients []string) bool {
	for _, p := range is.public {
		if slices.Contains(recipients, p) {
			return true
		}
	}
	return false
}

// Only is an identity file of just the identities whose public key is one of the recipients (a
// file may hold other keys, which a restore has no business carrying into a cluster), and whether
// there is one.
func (is Identities) Only(recipients []string) (string, bool) {
	var b strings.Builder
	for i, p := range is.public {
		if slices.Contains(recipients, p) {
			b.WriteString("# public key: " + p + "\n" + is.ids[i].(*age.X25519Identity).String() + "\n")
		}
	}
	return b.String(), b.Len() > 0
}

// Public are the identities' public keys (safe to print).
func (is Identities) Public() []string { return slices.Clone(is.public) }

// Empty says whether no identity was read.
func (is Identities) Empty() bool { return len(is.ids) == 0 }

// Seal returns a writer that encrypts what is written to it into w, to the recipients; Close
// writes the last chunk (w itself is not closed). No recipient: w itself, unencrypted.
func Seal(w io.Writer, to []age.Recipient) (io.WriteCloser, error) {
	if len(to) == 0 {
		return nopCloser{w}, nil
	}
	return age.Encrypt(w, to...)
}

// Open returns a reader of what r holds decrypted with the identities (none: r itself). An object
// none of them opens is ErrNoIdentity; a changed byte fails the Read that meets it.
func Open(r io.Reader, is Identities) (io.Reader, error) {
	if is.Empty() {
		return r, nil
	}
	out, err := age.Decrypt(r, is.ids...)
	var nomatch *age.NoIdentityMatchError
	if errors.As(err, &nomatch) {
		return nil, ErrNoIdentity
	}
	return out, err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
