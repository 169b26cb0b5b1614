/* Functions that make bounds someone else's problem. Included last by every lib/ and cmd/ file. */
#ifndef BOX_BANNED_H
#define BOX_BANNED_H

#define BOX_BANNED(func) sorry_##func##_is_banned_use_a_bounded_form

#undef strcpy
#define strcpy(x, y) BOX_BANNED(strcpy)
#undef strcat
#define strcat(x, y) BOX_BANNED(strcat)
#undef sprintf
#define sprintf(...) BOX_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BOX_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BOX_BANNED(strtok)
#undef atoi
#define atoi(x) BOX_BANNED(atoi)
#undef atol
#define atol(x) BOX_BANNED(atol)
#undef gets
#define gets(x) BOX_BANNED(gets)

#endif
