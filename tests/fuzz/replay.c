/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * replay: feed every file of the given corpus directories (or files) to a
 * fuzz target's LLVMFuzzerTestOneInput, so corpora and past crashes are
 * replayed in every build, with gcc and without libFuzzer. Exits 1 when a
 * directory is missing or empty, so a corpus cannot silently vanish.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_FILE_MAX (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	buf = malloc(REPLAY_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		fprintf(stderr, "replay: out of memory\n");
		return -1;
	}
	n = fread(buf, 1, REPLAY_FILE_MAX + 1, f);
	if (ferror(f) || n > REPLAY_FILE_MAX) {
		fprintf(stderr, "replay: %s: read error or larger than %u bytes\n", path,
			REPLAY_FILE_MAX);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* an exact-size copy, so ASan sees reads past the end of the input */
	{
		uint8_t *exact = malloc(n ? n : 1);

		if (!exact) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, n);
		free(buf);
		LLVMFuzzerTestOneInput(exact, n);
		free(exact);
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static long replay_dir(const char *dir)
{
	char **names = NULL;
	size_t nn = 0;
	long count = 0;
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		char **nv;

		if (de->d_name[0] == '.')
			continue;
		nv = realloc(names, (nn + 1) * sizeof(*nv));
		if (!nv)
			break;
		names = nv;
		names[nn] = strdup(de->d_name);
		if (!names[nn])
			break;
		nn++;
	}
	closedir(d);
	qsort(names, nn, sizeof(*names), cmp);
	for (size_t i = 0; i < nn; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				count = -1;
			else if (count >= 0)
				count++;
		}
		free(names[i]);
	}
	free(names);
	return count;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long n;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			bad = 1;
			continue;
		}
		if (S_ISDIR(st.st_mode))
			n = replay_dir(argv[i]);
		else
			n = replay_file(argv[i]) < 0 ? -1 : 1;
		if (n <= 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], n == 0 ? "no inputs" : "failed");
			bad = 1;
			continue;
		}
		printf("replayed %ld inputs from %s\n", n, argv[i]);
	}
	return bad;
}
