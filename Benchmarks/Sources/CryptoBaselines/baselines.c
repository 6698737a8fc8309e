#include "CryptoBaselines.h"

#include <sodium.h>
#include <string.h>

static unsigned char index_key[32], item_key[32], nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
static unsigned char message[40], additional[60], secret[2048];
static unsigned char sealed[sizeof secret + crypto_aead_xchacha20poly1305_ietf_ABYTES], opened[sizeof secret];

int crypto_baseline_prepare(void) {
    if (sodium_init() < 0) return -1;
    randombytes_buf(index_key, sizeof index_key);
    randombytes_buf(item_key, sizeof item_key);
    randombytes_buf(nonce, sizeof nonce);
    randombytes_buf(message, sizeof message);
    randombytes_buf(additional, sizeof additional);
    randombytes_buf(secret, sizeof secret);
    unsigned long long length = 0;
    return crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &length, secret, sizeof secret, additional, sizeof additional,
                                                      NULL, nonce, item_key);
}

int crypto_baseline_blind_index(void) {
    unsigned char index[16];
    crypto_generichash(index, sizeof index, message, sizeof message, index_key, sizeof index_key);
    return index[0];
}

int crypto_baseline_open(void) {
    return crypto_aead_xchacha20poly1305_ietf_decrypt(opened, NULL, NULL, sealed, sizeof sealed, additional, sizeof additional,
                                                      nonce, item_key);
}
