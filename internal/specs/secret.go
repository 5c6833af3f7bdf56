package specs

import (
	"crypto/rand"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Keys of the credentials Secret.
const (
	// SecretRootPassword is the server's root password.
	SecretRootPassword = "root-password"
	// SecretReplicationPassword is the password of the replication user.
	SecretReplicationPassword = "replication-password"
	// SecretOrchestrationPassword is the password of the user mysqlctl itself connects as.
	SecretOrchestrationPassword = "orchestration-password"
)

// Keys of the application accounts in the credentials Secret (see accounts.go). Applications
// read their user name and password from the same Secret (secretKeyRef).
const (
	// SecretAppUser names the application's writing account (default DefaultAppUser).
	SecretAppUser = "app-user"
	// SecretAppPassword is the writing application account's password.
	SecretAppPassword = "app-password"
	// SecretAppReadOnlyUser names the application's read-only account (default
	// DefaultAppReadOnlyUser).
	SecretAppReadOnlyUser = "app-readonly-user"
	// SecretAppReadOnlyPassword is the read-only application account's password.
	SecretAppReadOnlyPassword = "app-readonly-password"
)

// SecretKeys are the keys a credentials Secret must hold.
var SecretKeys = []string{SecretRootPassword, SecretReplicationPassword, SecretOrchestrationPassword}

// AppSecretKeys are the application accounts' password keys. BuildSecret generates them, but
// a Secret without them stays valid (Secrets made by earlier versions, or by hand, lack
// them): bootstrap then creates no application account (see AccountCredentials.MissingApp).
var AppSecretKeys = []string{SecretAppPassword, SecretAppReadOnlyPassword}

// BuildSecret returns the credentials Secret to create when none exists: random passwords
// (crypto/rand) for every key in SecretKeys and AppSecretKeys, and the default application
// user names. An existing Secret is never rebuilt or overwritten; see MissingSecretKeys.
func BuildSecret(c *v1.MysqlCluster) (*corev1.Secret, error) {
	data := map[string][]byte{
		SecretAppUser:         []byte(DefaultAppUser),
		SecretAppReadOnlyUser: []byte(DefaultAppReadOnlyUser),
	}
	for _, k := range append(append([]string(nil), SecretKeys...), AppSecretKeys...) {
		p, err := RandomPassword(32)
		if err != nil {
			return nil, err
		}
		data[k] = []byte(p)
	}
	return &corev1.Secret{
		TypeMeta: TypeMeta("v1", "Secret"),
		// No owner reference: the Secret outlives the cluster like the data volumes do, because
		// retained data can only be opened with these passwords. `delete --delete-data` removes it.
		ObjectMeta: secretMeta(c),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, nil
}

// MissingSecretKeys lists the required keys an existing Secret lacks or leaves empty.
func MissingSecretKeys(s *corev1.Secret) []string {
	var missing []string
	for _, k := range SecretKeys {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	return missing
}

// passwordAlphabet avoids characters that need quoting in shells, DSNs or SQL literals.
const passwordAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"

// RandomPassword returns n characters drawn uniformly from passwordAlphabet with crypto/rand.
func RandomPassword(n int) (string, error) {
	b := make([]byte, n)
	max := big.NewInt(int64(len(passwordAlphabet)))
	for i := range b {
		x, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		b[i] = passwordAlphabet[x.Int64()]
	}
	return string(b), nil
}

func TypeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func secretMeta(c *v1.MysqlCluster) metav1.ObjectMeta {
	m := ObjectMeta(c, SecretName(c), "credentials")
	m.OwnerReferences = nil
	return m
}

// Default names of the application accounts, used when the credentials Secret does not name
// them (SecretAppUser, SecretAppReadOnlyUser).
const (
	DefaultAppUser         = "app"
	DefaultAppReadOnlyUser = "app_ro"
)
