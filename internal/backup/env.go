package backup

import (
	"fmt"
	"strconv"

	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// The environment a backup or restore Job's agent (mysqlctl agent backup|restore) finds its bucket
// in. The keys come from the cluster's Secret (secretKeyRef), so that no credential is ever in a
// Job's arguments, its spec's literal values or the status.
const (
	EnvEndpoint  = "MYSQLCTL_BUCKET_ENDPOINT"
	EnvRegion    = "MYSQLCTL_BUCKET_REGION"
	EnvBucket    = "MYSQLCTL_BUCKET"
	EnvPrefix    = "MYSQLCTL_BUCKET_PREFIX"
	EnvPathStyle = "MYSQLCTL_BUCKET_PATH_STYLE"
	EnvAccessKey = "AWS_ACCESS_KEY_ID"
	EnvSecretKey = "AWS_SECRET_ACCESS_KEY"
	// EnvRootPassword is the new root password a restore from a bucket alone sets in the
	// restored data (spec.restore.resetPasswords), from the new cluster's Secret.
	EnvRootPassword = "MYSQLCTL_ROOT_PASSWORD"
	// EnvIdentity is the age identity file's text (private keys) a restore of an encrypted
	// backup decrypts it with, from the Secret the restore command made (never a value).
	EnvIdentity = "MYSQLCTL_AGE_IDENTITY"
)

// StoreConfigFromEnv reads the bucket's configuration from the environment (getenv).
func StoreConfigFromEnv(getenv func(string) string) (objectstore.Config, error) {
	c := objectstore.Config{
		Endpoint:  getenv(EnvEndpoint),
		Region:    getenv(EnvRegion),
		Bucket:    getenv(EnvBucket),
		Prefix:    getenv(EnvPrefix),
		AccessKey: getenv(EnvAccessKey),
		SecretKey: getenv(EnvSecretKey),
	}
	if v := getenv(EnvPathStyle); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, outcome.Invalid(fmt.Sprintf("%s=%q is not true or false", EnvPathStyle, v))
		}
		c.PathStyle = b
	}
	var missing []string
	for _, kv := range [][2]string{{EnvBucket, c.Bucket}, {EnvAccessKey, c.AccessKey}, {EnvSecretKey, c.SecretKey}} {
		if kv[1] == "" {
			missing = append(missing, kv[0])
		}
	}
	if len(missing) > 0 {
		return c, outcome.Invalid(fmt.Sprintf("the bucket's configuration is missing from the environment: set %v", missing))
	}
	return c, nil
}
