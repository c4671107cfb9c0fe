/* Known stdio I/O: fwrite 10 x 100 bytes, fseek to 0, fread 4 x 50, fseek to 500,
 * fread 300, then an append stream writes 10 bytes at the end (1000). Prints
 * "read|write OFFSET LENGTH" per call, from its own plan. */
#include <stdio.h>

int main(int argc, char **argv)
{
    char buf[1000] = {0};
    if (argc != 2)
        return 2;
    FILE *f = fopen(argv[1], "w+");
    if (!f)
        return 1;
    for (int i = 0; i < 10; i++)
        if (fwrite(buf, 1, 100, f) == 100)
            printf("write %d 100\n", i * 100);
    fseek(f, 0, SEEK_SET);
    for (int i = 0; i < 4; i++)
        if (fread(buf, 50, 1, f) == 1)
            printf("read %d 50\n", i * 50);
    fseeko(f, 500, SEEK_SET);
    if (fread(buf, 1, 300, f) == 300)
        printf("read 500 300\n");
    fclose(f);
    FILE *a = fopen(argv[1], "a");
    if (!a || fwrite(buf, 1, 10, a) != 10)
        return 1;
    printf("write 1000 10\n");
    return fclose(a);
}
