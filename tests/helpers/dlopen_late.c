/* dlopen_late.c — loads libraries after it started, for tests/e2e/envparse.bats: prints
 * "ready", then for each line read on stdin dlopens its next argument (RTLD_NOW) and prints
 * "loaded NAME" or "failed NAME: dlerror()"; ends when stdin closes. A name may use
 * $ORIGIN: the loader resolves it from the caller, this program, which liballoc's dlopen
 * must leave as it is. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("ready\n");
	fflush(stdout);
	char line[64];
	for (int i = 1; fgets(line, sizeof(line), stdin); i++) {
		if (i >= argc)
			continue;
		if (dlopen(argv[i], RTLD_NOW))
			printf("loaded %s\n", argv[i]);
		else
			printf("failed %s: %s\n", argv[i], dlerror());
		fflush(stdout);
	}
	return 0;
}
