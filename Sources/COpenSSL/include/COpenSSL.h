#ifndef APNS_RELAY_COPENSSL_H
#define APNS_RELAY_COPENSSL_H

/*
 * OpenSSL for Swift. Swift imports functions, not function-like macros, so
 * the handful of macros the relay needs are wrapped as real functions here.
 */

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* SSL_set_tlsext_host_name: the SNI server name. Returns 1 on success. */
int apns_relay_ssl_set_sni_hostname(SSL *ssl, const char *hostname);

/* SSL_CTX_set_min_proto_version: e.g. TLS1_2_VERSION. Returns 1 on success. */
int apns_relay_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version);

/* SSL_CTX_set_mode: partial writes and moving write buffers, for non-blocking I/O. */
long apns_relay_ssl_ctx_set_nonblocking_modes(SSL_CTX *ctx);

/* SSL_CTX_set_read_ahead(ctx, 1): each read(2) takes as much as the socket
   holds (several TLS records), instead of a header then a body per record. */
void apns_relay_ssl_ctx_enable_read_ahead(SSL_CTX *ctx);

/* EVP_PKEY_id / EVP_PKEY_get_id, e.g. EVP_PKEY_EC. */
int apns_relay_evp_pkey_id(const EVP_PKEY *pkey);

/* The curve name of an EC key ("prime256v1" for P-256) into buf; 1 on success. */
int apns_relay_evp_pkey_ec_group_name(const EVP_PKEY *pkey, char *buf, size_t buflen);

/* OPENSSL_free. */
void apns_relay_openssl_free(void *ptr);

/* BIO_get_mem_data: pointer to a memory BIO's bytes; returns the length. */
long apns_relay_bio_get_mem_data(BIO *bio, char **data);

/* A fresh EC P-256 key (EVP_EC_gen is a macro over a variadic call). NULL on failure. */
EVP_PKEY *apns_relay_ec_p256_generate(void);

/* The library's version string, e.g. "OpenSSL 3.0.17 1 Jul 2025". */
const char *apns_relay_openssl_version(void);

#endif
