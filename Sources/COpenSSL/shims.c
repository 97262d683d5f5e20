#include "COpenSSL.h"

int apns_relay_ssl_set_sni_hostname(SSL *ssl, const char *hostname) {
    return (int)SSL_set_tlsext_host_name(ssl, hostname);
}

int apns_relay_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

long apns_relay_ssl_ctx_set_nonblocking_modes(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

void apns_relay_ssl_ctx_enable_read_ahead(SSL_CTX *ctx) {
    SSL_CTX_set_read_ahead(ctx, 1);
}

int apns_relay_evp_pkey_id(const EVP_PKEY *pkey) {
    return EVP_PKEY_get_id(pkey);
}

int apns_relay_evp_pkey_ec_group_name(const EVP_PKEY *pkey, char *buf, size_t buflen) {
    size_t len = 0;
    return EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, buf, buflen, &len);
}

void apns_relay_openssl_free(void *ptr) {
    OPENSSL_free(ptr);
}

long apns_relay_bio_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

const char *apns_relay_openssl_version(void) {
    return OpenSSL_version(OPENSSL_VERSION);
}

EVP_PKEY *apns_relay_ec_p256_generate(void) {
    return EVP_EC_gen("P-256");
}
